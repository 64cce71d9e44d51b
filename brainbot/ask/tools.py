"""The tools the model may call: ``search_notes`` and ``read_note``, and their schemas.

A Conversation holds the index side of one question: the searcher and every
passage sent so far, in the order the API counts them, so that a citation's index finds
its Passage. It sends them as ``search_result`` blocks, or, for a server that drops those
(``citations="text"``, model/claude.py), as one text block of numbered passages whose
numbers run on through the conversation: passage n is the n-th sent, in the first request,
the earlier turns and every tool result alike. ``search_notes`` is brainbot's own retrieval; ``read_note``
reaches only indexed documents, by the path search_notes shows, never a file outside the
index. Note text is
data: whatever a note says, it cannot widen what these tools reach. A bad call comes back
to the model as an error it can read. Each tool call holds the conversation's ``lock``
while it runs (a server's lock: serve/service.py), and only then.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from brainbot.errors import BrainbotError, NotFoundError, NotUTF8Error
from brainbot.index import reading as spans

from .answers import Passage

MAX_K = 20  # search_notes hits per call
MAX_READ_LINES = 120  # read_note lines per call

TOOLS = [
    {"name": "search_notes",
     "description": "Search the user's indexed notes. Returns the best-matching chunks as "
                    "search results (source = path:start_line-end_line).",
     "input_schema": {
         "type": "object",
         "properties": {
             "query": {"type": "string", "description": "what to look for"},
             "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 8,
                   "description": "how many chunks to return"},
             "mode": {"type": "string", "enum": ["hybrid", "bm25", "vector"],
                      "default": "hybrid",
                      "description": "bm25 for exact words and names, vector for meaning, "
                                     "hybrid for both"}},
         "required": ["query"]}},
    {"name": "read_note",
     "description": "Read lines of one indexed note, e.g. around a search result. Only "
                    "paths returned by search_notes can be read.",
     "input_schema": {
         "type": "object",
         "properties": {
             "path": {"type": "string", "description": "the note's path as in a search result"},
             "start_line": {"type": "integer", "minimum": 1},
             "end_line": {"type": "integer", "minimum": 1}},
         "required": ["path"]}},
]


# -- the shared first step ------------------------------------------------------------
class Conversation:
    """The index-side state of one question: searcher, the blocks sent, tool execution;
    ``lock`` is held around each use of the searcher (none: the searcher is this
    question's alone)."""

    def __init__(self, searcher, k: int, question: str = "",
                 lock: AbstractContextManager | None = None, citations: str = "search_results"):
        self.citations = citations  # "search_results" or "text"
        self.searcher = searcher
        self.k = k
        self.question = question
        self.lock = lock if lock is not None else nullcontext()
        self.sent: list[Passage] = []  # position = search_result_index

    @staticmethod
    def passages_for(hits) -> list[Passage]:
        return [Passage(h.path, h.root, h.start_line, h.end_line, list(h.heading_path),
                        h.text, h.start_char, h.end_char,
                        h.document.sha256 if h.document else "") for h in hits]

    def send(self, srcs: list[Passage]) -> list[dict]:
        """Blocks for ``srcs``, registered in the order the API will count them: one
        search_result block each, or in text mode one text block numbering them all."""
        first = len(self.sent) + 1
        self.sent.extend(srcs)
        if self.citations != "text":
            return [s.block() for s in srcs]
        if not srcs:
            return []
        return [{"type": "text", "text": "\n\n".join(
            s.numbered(first + i) for i, s in enumerate(srcs)) + "\n\n"}]

    def passage_at(self, index) -> Passage | None:
        if isinstance(index, int) and 0 <= index < len(self.sent):
            return self.sent[index]
        return None

    # -- tools ----------------------------------------------------------------------
    def run_tool(self, name: str, args) -> dict:
        """A tool_result body: search_result blocks, or an error the model can read."""
        try:
            if not isinstance(args, dict):
                raise _ToolError("arguments must be a JSON object")
            if name not in ("search_notes", "read_note"):
                raise _ToolError(f"unknown tool {name!r}; use search_notes or read_note")
            with self.lock:
                if name == "search_notes":
                    return {"content": self._search_notes(args)}
                return {"content": self._read_note(args)}
        except (_ToolError, BrainbotError) as exc:
            return {"content": str(exc), "is_error": True}

    def _search_notes(self, args: dict) -> list[dict]:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise _ToolError("query must be a non-empty string")
        NotUTF8Error.check(query, "the query")
        k = _int_arg(args, "k", self.k)
        mode = args.get("mode") or "hybrid"
        if mode not in ("hybrid", "bm25", "vector"):
            raise _ToolError("mode must be one of hybrid, bm25, vector")
        hits = self.searcher.search(query, max(1, min(MAX_K, k)), mode=mode)
        if not hits:
            return [{"type": "text", "text": "no matches"}]
        return self.send(self.passages_for(hits))

    def _read_note(self, args: dict) -> list[dict]:
        path = args.get("path")
        if not isinstance(path, str) or not path:
            raise _ToolError("path must be a non-empty string")
        NotUTF8Error.check(path, "the path")
        # Paths are matched exactly against the documents table; these are refused
        # before the lookup so the error says why.
        parts = path.replace("\\", "/").split("/")
        if path.startswith(("/", "\\", "~")) or ".." in parts or "\x00" in path or (
                len(path) > 1 and path[1] == ":"):
            raise _ToolError(f"{path!r} is not a document of this index; only indexed "
                             "notes can be read, by the path search_notes shows")
        try:
            doc = spans.document(self.searcher.store, path)
            lines = spans.stored_lines(self.searcher.store, doc)
        except NotFoundError as exc:
            raise _ToolError(str(exc)) from None
        start = max(1, min(_int_arg(args, "start_line", 1), len(lines)))
        end = _int_arg(args, "end_line", start + MAX_READ_LINES - 1)
        end = max(start, min(end, len(lines), start + MAX_READ_LINES - 1))
        start_char = sum(len(line) + 1 for line in lines[:start - 1])
        text = "\n".join(lines[start - 1:end])
        if not text.strip():
            return [{"type": "text", "text": f"{doc.path}:{start}-{end} is blank"}]
        heading = self.searcher.store.heading_at(doc.id, start)
        return self.send([Passage(doc.path, doc.root, start, end, heading, text, start_char,
                                  start_char + len(text), doc.sha256)])


class _ToolError(Exception):
    pass


def _int_arg(args: dict, name: str, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _ToolError(f"{name} must be an integer")
    return int(value)
