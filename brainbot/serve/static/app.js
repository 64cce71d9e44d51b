// brainbot's page: search as you type, filters, hit cards, Ask with clickable citations,
// a note reader and its related notes. Note text is untrusted: it is only ever inserted
// as text nodes, or as the elements static/markdown.js builds from it (never as HTML).
"use strict";

const $ = (id) => document.getElementById(id);
const DEBOUNCE_MS = 250;
let timer = null;
let latest = 0;
let vaults = {};  // indexed folder -> {name, prefix} of the Obsidian vault holding it
let roots = [];  // the indexed folders on this machine
let vaultsReady = Promise.resolve();

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c) node.append(c);
  return node;
}

async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

// The one line a partly embedded index earns (the server's partial_index), or none.
function showPartial(line) {
  $("partial").textContent = line || "";
  $("partial").hidden = !line;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

// Lucene's English stop words (as the BM25 analyzer drops them) and question words.
const STOP = new Set(("a an and are as at be but by for if in into is it no not of on or " +
  "such that the their then there these they this to was will with how what when where " +
  "why who which do does did i my me").split(" "));

function terms(query) {
  const words = query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) || [];
  return [...new Set(words.filter((w) => !STOP.has(w)))];
}

// The snippet as text nodes, with the query's words (whole, or with an s/es/ed/ing
// ending) in <mark> elements.
let markedFor = { key: null, re: null };  // the last query's pattern: one per search
function marked(text, words) {
  const frag = document.createDocumentFragment();
  if (!words.length) { frag.append(text); return frag; }
  const key = words.join("\u0000");
  if (markedFor.key !== key) {
    const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    markedFor = { key, re: new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join("|")})` +
      "(?:s|es|ed|ing)?(?![\\p{L}\\p{N}])", "giu") };
  }
  const re = markedFor.re;
  let last = 0;
  for (const m of text.matchAll(re)) {
    frag.append(text.slice(last, m.index), el("mark", { text: m[0] }));
    last = m.index + m[0].length;
  }
  frag.append(text.slice(last));
  return frag;
}

function badges(item) {
  const out = [];
  if (item.stale) out.push(el("span", { class: "badge stale", text: "stale",
    title: "the note changed on disk since it was indexed" }));
  if ("embedded" in item) out.push(el("span", {
    class: "badge embedded", text: item.embedded ? "embedded" : "not embedded yet" }));
  return out;
}

// obsidian://open for a note in an Obsidian vault (.obsidian/ in its folder or above),
// else the editor template (localStorage "brainbot.editor"), vscode://file/ by default.
function editorLink(hit) {
  const vault = vaults[hit.root];
  let href;
  if (vault) {
    href = `obsidian://open?vault=${encodeURIComponent(vault.name)}` +
      `&file=${encodeURIComponent(vault.prefix + hit.path)}`;
  } else {
    const template = localStorage.getItem("brainbot.editor") || "vscode://file/{path}:{line}";
    const full = hit.root ? `${hit.root.replace(/\/$/, "")}/${hit.path}` : hit.path;
    // Each segment encoded, the "/" kept: encodeURI left "#" and "?" in a file name
    // ("C# tips?.md"), which the editor then read as a fragment and a query.
    const encoded = full.split("/").map(encodeURIComponent).join("/");
    href = template.replace("{path}", encoded).replace("{line}", hit.start_line || 1);
  }
  return el("a", { href, class: "open", text: vault ? "open in Obsidian" : "open",
    title: "open in your editor" });
}

// [ROOT::]PATH: names the note in its own indexed folder when several are indexed.
function noteRef(item) {
  return item.root ? `${item.root}::${item.path}` : item.path;
}

// The last name of the note's indexed folder, shown when several folders are indexed
// (two may both hold README.md); none with one.
function folderLabel(item) {
  if (roots.length < 2 || !item.root) return null;
  const name = item.root.replace(/[\\/]+$/, "").split(/[\\/]/).pop();
  return el("span", { class: "folder", text: `${name}/`, title: item.root });
}

function actions(item) {
  const read = el("button", { type: "button", class: "read", text: "read",
    title: "read this note, with its related notes" });
  read.addEventListener("click", () => openNote(item));
  const near = el("button", { type: "button", class: "show-related", text: "related",
    title: "notes related to this one" });
  near.addEventListener("click", () => showRelated(item));
  return el("span", { class: "actions" }, read, near);
}

// ``box`` filled with ``text``'s markdown as elements (static/markdown.js), the query's
// ``words`` marked; a link to another note opens it in the reader, resolved from ``item``
// (the note the text is from). As plain text if the renderer fails.
function markdown(box, text, item, words = [], opts = {}) {
  box.classList.add("md");
  try {
    box.replaceChildren(BrainbotMarkdown.render(text || "", { ...opts,
      text: (s) => marked(s, words), openNote: (link) => followLink(item, link) }));
  } catch (err) {
    box.classList.add("plain");
    box.replaceChildren(marked(text || "", words));
  }
  return box;
}

// The note a clicked link names ([[wikilink]], [text](note.md)), opened in the reader at
// its heading; the server resolves it as the indexer did (/api/resolve).
async function followLink(item, link) {
  try {
    const note = link.target ? await api("GET", "/api/resolve?" + new URLSearchParams(
      { from: noteRef(item), kind: link.kind, target: link.target })) : item;
    await openNote(note, link.heading);
  } catch (err) {
    showError(err.message);
  }
}

function hitCard(hit, words) {
  const heading = (hit.heading_path || []).join(" › ");
  const title = el("h2", {}, folderLabel(hit), el("span", { class: "path", text: hit.path }),
    ...badges(hit));
  const where = el("div", { class: "where",
    text: `lines ${hit.start_line}-${hit.end_line}${heading ? " · " + heading : ""} · ` });
  where.append(editorLink(hit), actions(hit));
  const snippet = markdown(el("div", { class: "snippet" }), hit.text, hit, words);
  return el("article", { class: "card hit" }, title, where, snippet);
}

// The note in the reader, rendered, scrolled to ``heading`` when a link named one.
async function openNote(item, heading) {
  const box = $("note");
  const close = el("button", { type: "button", class: "close", text: "close" });
  close.addEventListener("click", () => { box.hidden = true; box.replaceChildren(); });
  const view = passage();
  const where = el("div", { class: "where" }, editorLink(item), " ", view.toggle, " ", close);
  box.replaceChildren(el("article", { class: "card reader" },
    el("h2", {}, folderLabel(item), el("span", { class: "path", text: item.path })), where,
    view.box));
  box.hidden = false;
  showRelated(item);
  await fillPassage(view, noteRef(item), { frontMatter: true });
  const want = (heading || "").trim().toLowerCase();
  const found = want && [...view.md.querySelectorAll("h3, h4, h5, h6")]
    .find((h) => h.textContent.trim().toLowerCase() === want);
  (found || box).scrollIntoView({ block: "nearest" });
}

// A passage of a note: its markdown rendered, and a button that shows its numbered lines
// instead, as `brainbot get` prints them.
function passage() {
  const md = el("div", { class: "md", text: "…" });
  const pre = el("pre", { class: "lines", hidden: "" });
  const toggle = el("button", { type: "button", class: "source", text: "source",
    title: "show the numbered lines" });
  toggle.addEventListener("click", () => {
    const lines = pre.hidden;
    pre.hidden = !lines;
    md.hidden = lines;
    toggle.textContent = lines ? "rendered" : "source";
  });
  return { box: el("div", { class: "passage" }, md, pre), md, pre, toggle };
}

// The lines of ``ref`` (as `brainbot get` takes it) into ``view``: rendered, and numbered.
async function fillPassage(view, ref, opts = {}) {
  try {
    const got = await api("GET", `/api/get?ref=${encodeURIComponent(ref)}`);
    view.pre.textContent = got.lines.map((l) => `${String(l.line).padStart(5)}  ${l.text}`)
      .join("\n");
    markdown(view.md, got.lines.map((l) => l.text).join("\n"),
      { root: got.root, path: got.path }, [], opts);
    if (got.stale) view.box.prepend(el("span", { class: "badge stale",
      text: "changed on disk" }));
  } catch (err) {
    view.md.textContent = err.message;
  }
}

function relatedCard(rel) {
  const heading = (rel.heading_path || []).join(" › ");
  const title = el("h3", {}, folderLabel(rel), el("span", { class: "path", text: rel.path }),
    rel.linked ? el("span", { class: "badge linked", text: "linked",
      title: "the two notes already link" }) : null, ...badges(rel));
  const where = el("div", { class: "where", text: `score ${rel.score.toFixed(3)} · lines ` +
    `${rel.start_line}-${rel.end_line}${heading ? " · " + heading : ""} · ` });
  where.append(editorLink(rel), actions(rel));
  const snippet = markdown(el("div", { class: "snippet clamped" }), rel.text, rel);
  return el("article", { class: "card related" }, title, where, snippet);
}

async function showRelated(item) {
  const box = $("related");
  const head = el("h2", { text: "Related to " }, el("span", { text: item.path }));
  box.replaceChildren(head, el("p", { class: "muted", text: "…" }));
  box.hidden = false;
  try {
    const r = await api("GET", `/api/related?note=${encodeURIComponent(noteRef(item))}&k=8`);
    const line = r.partial_index || r.partial;
    const partial = line ? el("p", { class: "muted partial", text: line }) : null;
    const cards = r.related.map(relatedCard);
    box.replaceChildren(head, ...(partial ? [partial] : []), ...cards);
    if (!cards.length) box.append(el("p", { class: "muted", text: "No related notes." }));
  } catch (err) {
    box.replaceChildren(head, el("p", { class: "error", text: err.message }));
  }
}

async function loadVaults() {
  try {
    const r = await api("GET", "/api/roots");
    roots = r.roots.map((x) => x.root);
    vaults = Object.fromEntries(r.roots.filter((x) => x.obsidian)
      .map((x) => [x.root, x.obsidian]));
  } catch (err) {
    vaults = {};
    roots = [];
  }
}

function filters() {
  const body = { mode: $("mode").value };
  for (const name of ["tag", "path", "since", "before"]) {
    const v = $(name).value.trim();
    if (v) body[name] = v;
  }
  return body;
}

async function search() {
  const query = $("q").value.trim();
  const list = $("hits");
  const mine = ++latest;
  if (!query) {
    list.replaceChildren(); showError(""); showPartial("");
    list.setAttribute("aria-busy", "false");
    return;
  }
  list.setAttribute("aria-busy", "true");
  try {
    const found = await api("POST", "/api/search", { query, k: 10, ...filters() });
    await vaultsReady;  // hits link to Obsidian once the vaults are known
    if (mine !== latest) return;  // a newer search is on its way
    showError("");
    showPartial(found.partial_index);
    const words = terms(query);
    list.replaceChildren(...found.hits.map((h) => hitCard(h, words)));
    if (!found.hits.length) list.append(el("p", { class: "muted", text: "No hits." }));
  } catch (err) {
    if (mine === latest) showError(err.message);
  } finally {
    // Not busy once the latest search is shown (assistive tech, and the browser test,
    // wait for that rather than for the first cards, which a later search may replace).
    if (mine === latest && !timer) list.setAttribute("aria-busy", "false");
  }
}

async function showLines(cite, button) {
  const next = button.nextElementSibling;
  if (next && next.classList.contains("passage")) { next.remove(); return; }
  const count = cite.end_line - cite.start_line + 1;
  const view = passage();
  view.box.prepend(el("div", { class: "where",
    text: `lines ${cite.start_line}-${cite.end_line} · ` }, view.toggle));
  button.after(view.box);
  // ROOT::PATH:LINE:COUNT, as for hits: README.md may be in two indexed folders.
  await fillPassage(view, `${noteRef(cite)}:${cite.start_line}:${count}`);
}

function citationButton(cite) {
  const ok = cite.verified ? el("span", { class: "badge ok", text: "verified" })
    : el("span", { class: "badge bad", text: "unverified" });
  const folder = folderLabel(cite);
  const button = el("button", { type: "button", class: "citation",
    text: `[${cite.n}] ${folder ? folder.textContent : ""}${cite.path}:${cite.start_line}-` +
      `${cite.end_line} ` }, ok, ...badges(cite));
  button.addEventListener("click", () => showLines(cite, button));
  return button;
}

// The passages nearest the question: folded away under an answer, open under a refusal.
function nearMisses(answer) {
  const near = answer.nearest || [];
  if (!near.length) return null;
  const box = el("details", { class: "nearest" }, el("summary", { text: "Nearest passages" }));
  box.open = answer.refused;
  for (const n of near) {
    const where = n.path ? `${n.path}:${n.start_line}-${n.end_line}` : JSON.stringify(n);
    box.append(el("p", { class: "muted", text: where }));
  }
  return box;
}

// -- the conversation: a thread of asks, each answer streamed in as it comes -------------
// POST /api/ask with Accept: text/event-stream answers as Server-Sent Events: "draft"
// events while the model speaks (not checked yet: shown as a draft), then "text" (the
// checked answer's text) and "answer" (the whole answer's JSON), or "error".
// EventSource cannot POST, so the body is read here with a stream reader.
let conversation = null;  // the thread's id, once its first answer named it
let asking = null;  // the AbortController of the answer streaming in, if one is

// One event of an event stream's text ("event:" and "data:" lines; ":" a comment), or
// null for a block with no data (a heartbeat).
function sseEvent(block) {
  let name = "message";
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon === 0) continue;
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { name, data: data.join("\n") } : null;
}

// Each event of ``response``'s body to ``onEvent(name, data)`` as it arrives.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value, { stream: !done });
      const blocks = buffer.split(/\r?\n\r?\n/);
      buffer = done ? "" : blocks.pop();
      for (const block of blocks) {
        const event = sseEvent(block);
        if (event) onEvent(event.name, JSON.parse(event.data));
      }
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// The answer to ``body`` ({question, conversation?}); ``onText(piece)`` paints the text
// as it comes. A refusal before the stream (bad input, a full queue) is the plain JSON.
async function askStream(body, onText, signal) {
  const r = await fetch("/api/ask", { method: "POST", signal, body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" } });
  if (!r.ok || !(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    const data = await r.json().catch(() => ({}));
    throw new Error(data.error || `HTTP ${r.status}`);
  }
  let answer = null;
  await readEvents(r, (name, data) => {
    if (name === "draft") onText(data.text);
    else if (name === "answer") answer = data;
    else if (name === "error") throw new Error(data.error);
  });
  if (!answer) throw new Error("the answer stopped before its end");
  return answer;
}

// A new turn at the end of the thread: its question, and where its answer will come.
function newTurn(question) {
  const turn = {
    meta: el("div", { class: "meta muted", text: "Thinking…" }),
    text: el("div", { class: "text" }),
  };
  turn.node = el("li", { class: "card turn", "aria-busy": "true" },
    el("h3", { class: "question", text: question }), turn.meta, turn.text);
  $("turns").append(turn.node);
  return turn;
}

// The answer as it is kept (its [n] marks, or the refusal the text became) in place of
// what streamed, with its outcome, citations and nearest passages. Its text is rendered
// as a note's is (static/markdown.js: elements built one by one, never an HTML string):
// the model's text, like the notes it quotes, is untrusted. It streamed in as plain text,
// since half a "**" or "[a](" is not markdown yet. A link to a note resolves from the
// note cited first.
function finishTurn(turn, a, question) {
  turn.meta.replaceChildren(
    el("span", { class: a.refused ? "badge bad" : "badge ok", text: a.outcome }),
    el("span", { class: "badge embedded", text: a.mode }),
    a.searched && a.searched !== question ? ` searched as: ${a.searched}` : "");
  turn.text.classList.remove("draft");  // the checked answer replaces the draft
  markdown(turn.text, a.answer || "", (a.citations || [])[0] || { path: "" });
  const notes = [a.partial_index, a.conversation_note].filter(Boolean)
    .map((line) => el("p", { class: "muted partial", text: line }));
  turn.node.append(...notes, el("div", { class: "citations" },
    ...(a.citations || []).map(citationButton)), nearMisses(a) || "");
  turn.node.dataset.conversation = a.conversation || "";
  turn.node.setAttribute("aria-busy", "false");
}

// The model's text as it streams: a draft, labelled and dimmed until the checked answer
// replaces it (finishTurn), or struck through when the answer fails (failTurn).
function draft(turn, piece) {
  if (!turn.text.classList.contains("draft")) {
    turn.text.classList.add("draft");
    turn.meta.textContent = "Draft, not checked against your notes yet…";
  }
  turn.text.append(piece);
}

function failTurn(turn, message) {
  if (turn.text.classList.contains("draft")) turn.text.classList.add("failed");
  turn.meta.replaceChildren(el("span", { class: "error", text: message }));
  turn.node.setAttribute("aria-busy", "false");
}

function threadBusy(busy) {
  $("answer").setAttribute("aria-busy", busy ? "true" : "false");
  $("follow-up-send").disabled = busy;
}

// Ask ``question`` as the thread's next turn (its first starts the conversation).
async function askInThread(question) {
  const turn = newTurn(question);
  const controller = new AbortController();
  asking = controller;
  threadBusy(true);
  try {
    const body = conversation ? { question, conversation } : { question };
    const a = await askStream(body, (piece) => draft(turn, piece), controller.signal);
    // the id a follow-up continues, as the answer names it: a new one when the old could
    // not be read, none when nothing keeps this turn (its note says so): start afresh
    conversation = a.conversation || null;
    $("answer").dataset.conversation = conversation || "";
    finishTurn(turn, a, question);
  } catch (err) {
    if (!controller.signal.aborted) failTurn(turn, err.message);
  } finally {
    if (asking === controller) { asking = null; threadBusy(false); }
  }
}

// The Ask button: the search box's question starts a new conversation.
function ask() {
  const question = $("q").value.trim();
  if (!question) { $("q").focus(); return; }
  newConversation();
  $("answer").hidden = false;
  askInThread(question);
}

// The follow-up box: its question continues the thread.
function followUp(e) {
  e.preventDefault();
  const question = $("follow-up").value.trim();
  if (!question || asking) return;
  $("follow-up").value = "";
  askInThread(question);
}

// The thread cleared (an answer still coming is dropped here; the server keeps its turn).
function newConversation() {
  if (asking) asking.abort();
  asking = null;
  conversation = null;
  threadBusy(false);
  $("turns").replaceChildren();
  delete $("answer").dataset.conversation;
  $("answer").hidden = true;
}

async function status() {
  try {
    const s = await api("GET", "/api/status");
    $("status").textContent = `${s.documents} notes · ${s.chunks} chunks`;
  } catch (err) {
    $("status").textContent = err.message;
  }
}

function later() {
  clearTimeout(timer);
  $("hits").setAttribute("aria-busy", "true");
  timer = setTimeout(() => { timer = null; search(); }, DEBOUNCE_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  $("q").addEventListener("input", later);
  for (const id of ["mode", "tag", "path", "since", "before"]) {
    $(id).addEventListener("change", later);
  }
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    clearTimeout(timer);
    timer = null;
    search();
  });
  $("ask").addEventListener("click", ask);
  $("follow-up-form").addEventListener("submit", followUp);
  $("new-conversation").addEventListener("click", () => { newConversation(); $("q").focus(); });
  vaultsReady = loadVaults();
  document.addEventListener("keydown", (e) => {
    const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    if (e.key === "/" && !typing) { e.preventDefault(); $("q").focus(); }
  });
  status();
});
