"""The index progress bars are the CLI's: drawn on a terminal from the indexer's
callbacks, absent otherwise; the indexer itself draws nothing."""

from __future__ import annotations

import io

from brainbot.index.indexer import Indexer
from brainbot.render import progress_printer


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_off_a_terminal():
    assert progress_printer(io.StringIO()) is None
    assert progress_printer(io.StringIO(), unit="chunk") is None


def test_bar_draws_on_a_terminal_and_closes_at_the_total():
    out = Terminal()
    update = progress_printer(out, unit="chunk")
    for done in (1, 2, 5, 5):
        update(done, 5)
    text = out.getvalue()
    assert "embedding" in text and "/5 [" in text and "chunk/s" in text
    assert text.endswith(" \r")  # closed at the total: leave=False clears the line


def test_the_indexer_reports_through_callbacks_only(tmp_path, vault, counting, capsys):
    """Every file and every embedded chunk is reported to the callbacks, in order, up to
    the totals; nothing is written to the terminal by the indexer itself."""
    files, chunks = [], []
    with Indexer(tmp_path / "b.db", embedder=counting, workers=1,
                 progress=lambda d, t: files.append((d, t)),
                 embed_progress=lambda d, t: chunks.append((d, t))) as ix:
        stats = ix.index_paths([vault])
    assert files == [(i, 3) for i in range(1, 4)]
    assert chunks and chunks[-1] == (stats.chunks, stats.chunks)
    assert [d for d, _ in chunks] == sorted(d for d, _ in chunks)
    assert capsys.readouterr() == ("", "")


def test_the_indexer_has_no_terminal_code():
    import inspect

    from brainbot.index import indexer

    source = inspect.getsource(indexer)
    assert "tqdm" not in source and "isatty" not in source
