"""The page in a real browser: headless Debian chromium driven by Selenium (chromium-driver),
against a real `brainbot serve`. Types a query, sees the hits, opens a note, follows its
related notes, asks and opens a verified citation's lines, checks the obsidian:// links of
a vault holding .obsidian/, and that a hostile note's <script> is shown as text; the answer
streams into a thread, and its kept text is rendered as markdown with its HTML as text.

Skipped with the reason when chromium, chromedriver or selenium is missing, unless
BRAINBOT_REQUIRE_BROWSER=1 (set by .ci/run), which makes that a failure. `make test`
installs chromium and chromium-driver when it runs as root on Debian.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import quote

import fake_anthropic as fa
import pytest
from test_serve import Daemon, partial_daemon  # noqa: F401 - a fixture

from brainbot.index.indexer import Indexer

# Every payload sets window.__pwned if it ever runs; the CSP alone would stop most of them,
# so the test also looks for the elements and attributes themselves.
HOSTILE = """# Hostile clipping

Pasted from a web page about zeppelins: <script>window.__pwned = 1</script> \
<img src=x onerror="window.__pwned = 2">

<iframe src="javascript:window.__pwned = 3"></iframe>
<svg onload="window.__pwned = 4"><circle r="1"/></svg>
<a href="javascript:window.__pwned = 5">html link</a>

## Zeppelin facts

- **Hindenburg** flew in *1936*
- [ ] visit Friedrichshafen
  - nested item

1. first airship
2. second airship

| Airship | Length |
|---|--:|
| LZ 129 | 245 m |

```js
window.__pwned = 7
```

Zeppelins over the garden: [[Tomatoes#Side shoots]], [[compost|the heap]] and \
[the tomato note](../garden/tomatoes.md).

[js](javascript:window.__pwned=6) [mixed](JaVaScRiPt:window.__pwned=6) \
[entity](jav&#x61;script:window.__pwned=6) [space]( javascript:window.__pwned=6) \
[data](data:text/html,<script>window.__pwned=8</script>) [vb](vbscript:msgbox(1)) \
<javascript:window.__pwned=9> [ref][r] [ctl](<\x01javascript:window.__pwned=6>) \
[tab](<java\tscript:window.__pwned=6>) [esc](javascript\\:window.__pwned=6)

[r]: javascript:window.__pwned=10
"""
NOTES = {
    "bread/sourdough.md": "# Sourdough\n\nFeed the sourdough starter twice a day with rye "
                          "flour and water.\n\n## Proofing\n\nThe dough proofs overnight in "
                          "the fridge; bake the loaf in a hot Dutch oven. See [[rye bread]].\n",
    "bread/rye bread.md": "# Rye bread\n\nA dense rye loaf from a sourdough starter. Mix the "
                          "rye flour, let the dough proof for four hours, bake slowly.\n",
    "bread/baguette.md": "# Baguette\n\nBaguettes need strong flour, a long cold proof of the "
                         "dough and steam in the oven so the crust cracks.\n",
    "garden/tomatoes.md": "# Tomatoes\n\nThe tomato seedlings want full sun and water every "
                          "evening.\n\n## Side shoots\n\nPinch out the side shoots.\n",
    "garden/compost.md": "# Compost\n\nTurn the compost heap every week; keep it as damp as "
                         "a wrung-out sponge.\n",
    "clips/hostile.md": HOSTILE,
}


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    for tool, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian: apt-get install {package})"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (pip install -e '.[test]')"
    return None


def chrome(width: int = 1400, height: int = 1000):
    """Headless chromium under chromedriver, both from PATH (no driver download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", f"--window-size={width},{height}"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                            options=opts)


@pytest.fixture(scope="module")
def driver():
    reason = browser_missing()
    if reason:
        if os.environ.get("BRAINBOT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"BRAINBOT_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager fetch a driver
    d = chrome()
    d.set_page_load_timeout(60)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory, shared_embedder):
    vault = tmp_path_factory.mktemp("browser") / "My Vault"
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    (vault / ".obsidian").mkdir()
    db = vault.parent / "b.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    d = Daemon(db)
    yield f"http://127.0.0.1:{d.port}", d
    assert d.stop() in (0, -15)  # uvicorn re-raises the SIGTERM it handled


def wait(driver, condition, timeout: float = 60):
    """``condition`` once true; an element replaced meanwhile (the page re-rendered the
    cards: a search typed after another one) counts as not yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)
                         ).until(condition)


def cards(driver, css: str) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def search(driver, text: str):
    """Type ``text`` into the box (search as you type) and wait for hit cards."""
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(text)
    # The cards of the last search, not of one typed half-way or started by a filter:
    # the page says aria-busy until the latest search is shown.
    wait(driver, lambda d: d.find_element(By.ID, "hits").get_attribute("aria-busy") ==
         "false" and cards(d, "#hits .card.hit") and text.split()[0].lower() in
         d.find_element(By.ID, "hits").text.lower())
    return cards(driver, "#hits .card.hit")


def card_path(card) -> str:
    from selenium.webdriver.common.by import By

    return card.find_element(By.CSS_SELECTOR, "h2 span.path, h3 span.path").text


def test_search_open_a_note_and_follow_related(driver, site):
    from selenium.webdriver.common.by import By

    base, _ = site
    driver.get(base + "/")
    hits = search(driver, "feed the sourdough starter")
    assert card_path(hits[0]) == "bread/sourdough.md"
    marks = [m.text.lower() for m in hits[0].find_elements(By.CSS_SELECTOR, "mark")]
    assert marks and set(marks) <= {"feed", "sourdough", "starter"}  # whole words, no "the"
    hits[0].find_element(By.CSS_SELECTOR, "button.read").click()
    wait(driver, lambda d: "Feed the sourdough starter" in d.find_element(By.ID, "note").text)
    wait(driver, lambda d: cards(d, "#related .card.related"))
    related = cards(driver, "#related .card.related")
    paths = [card_path(c) for c in related]
    assert "bread/sourdough.md" not in paths
    assert set(paths[:2]) == {"bread/rye bread.md", "bread/baguette.md"}
    rye = related[paths.index("bread/rye bread.md")]
    assert "linked" in rye.text  # sourdough links to [[rye bread]]
    rye.find_element(By.CSS_SELECTOR, "button.read").click()
    wait(driver, lambda d: "A dense rye loaf" in d.find_element(By.ID, "note").text)
    wait(driver, lambda d: "Related to bread/rye bread.md" in
         d.find_element(By.ID, "related").text)


def test_hits_open_in_obsidian_when_the_root_is_a_vault(driver, site):
    from selenium.webdriver.common.by import By

    base, _ = site
    driver.get(base + "/")
    hits = search(driver, "rye loaf")
    link = hits[0].find_element(By.CSS_SELECTOR, "a.open")
    assert link.get_attribute("href") == (
        f"obsidian://open?vault={quote('My Vault', safe='')}"
        f"&file={quote(card_path(hits[0]), safe='')}")


def test_ask_shows_a_verified_citation_and_its_lines(driver, site):
    from selenium.webdriver.common.by import By

    base, _ = site
    driver.get(base + "/")
    driver.find_element(By.ID, "q").send_keys("How often do I feed the sourdough starter?")
    driver.find_element(By.ID, "ask").click()
    wait(driver, lambda d: cards(d, "#answer button.citation"))
    answer = driver.find_element(By.ID, "answer")
    assert "twice a day" in answer.text
    cite = cards(driver, "#answer button.citation")[0]
    assert "verified" in cite.text and "bread/sourdough.md" in cite.text
    cite.click()
    wait(driver, lambda d: cards(d, "#answer .passage .md")
         and "twice a day" in cards(d, "#answer .passage .md")[0].text)
    # The passage's source button shows the numbered lines instead.
    cards(driver, "#answer .passage button.source")[0].click()
    lines = cards(driver, "#answer .passage pre.lines")[0]
    assert lines.is_displayed() and "twice a day" in lines.text
    assert lines.text.lstrip().startswith("3  ")


# -- the conversation: an answer streamed into a thread, a follow-up, a new conversation --
QUESTION = "feed the sourdough starter"  # searched as typed, then asked


def sourdough(body) -> int:
    """Which search result sent to the model is the sourdough note."""
    return next(i for i, b in enumerate(fa.search_results(body))
                if b["source"].startswith("bread/sourdough.md"))


def twice(body):
    """The first answer: one sentence citing the sourdough note, in four text deltas."""
    said = fa.message(fa.text("You feed it twice a day, morning and evening.",
                              [fa.cite_text(body, sourdough(body), "twice")]))
    said.pieces = 4
    return said


@pytest.fixture(scope="module")
def claude_site(tmp_path_factory, shared_embedder, fake):
    """The vault of ``site`` served by a daemon whose Claude is the fake Messages API."""
    vault = tmp_path_factory.mktemp("claude") / "Vault"
    for rel, body in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(body, encoding="utf-8")
    with Indexer(vault.parent / "c.db", embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    d = Daemon(vault.parent / "c.db", env={"ANTHROPIC_BASE_URL": fake.url,
                                           "ANTHROPIC_API_KEY": "test-key"})
    yield f"http://127.0.0.1:{d.port}"
    fake.release()
    assert d.stop() in (0, -15)


def answer_text(driver, n: int) -> str:
    """The text of turn ``n`` (from 1) of the thread as painted now; "" before it is."""
    return driver.execute_script(
        "const t = document.querySelector(`#turns > .turn:nth-child(${arguments[0]}) .text`);"
        " return t ? t.textContent : '';", n)


def turns(driver) -> list:
    return cards(driver, "#turns > .turn")


def test_an_answer_streams_into_a_thread_and_a_follow_up_continues_it(driver, claude_site,
                                                                     fake):
    """Ask: the answer's text is painted while the model is still held between its words
    (two partial states before the end), dimmed as a draft, then replaced by the checked
    answer with its verified citation, whose lines open.
    A follow-up is a second turn of the same conversation, sent with its id; "new
    conversation" clears the thread, and the next Ask starts another one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sent = []

    def flour(body):
        sent.append(body)
        cited = fa.cite_text(body, sourdough(body), "rye flour")
        return fa.message(fa.text("Rye flour and water.", [cited]))

    driver.get(claude_site + "/")
    search(driver, QUESTION)
    fake.push(twice, flour, twice)
    fake.pace()
    try:
        driver.find_element(By.ID, "ask").click()
        first = wait(driver, lambda d: answer_text(d, 1))
        assert fake.held == 1  # the model has more to say
        shown = driver.find_element(By.CSS_SELECTOR, "#turns > .turn:nth-child(1) .text")
        assert "draft" in shown.get_attribute("class").split()  # issue 42: not checked yet
        assert driver.find_element(By.CSS_SELECTOR, "#turns > .turn:nth-child(1) .meta") \
            .text.startswith("Draft, not checked against your notes yet")
        fake.step()
        second = wait(driver, lambda d: answer_text(d, 1) not in ("", first) and
                      answer_text(d, 1))
        assert second.startswith(first) and fake.held == 1
    finally:
        fake.release()
    wait(driver, lambda d: cards(d, "#turns > .turn:nth-child(1) button.citation"))
    final = answer_text(driver, 1)
    assert final.startswith("You feed it twice a day") and "[1]" in final
    assert "draft" not in driver.find_element(
        By.CSS_SELECTOR, "#turns > .turn:nth-child(1) .text").get_attribute("class").split()
    assert len({first, second, final}) == 3
    cite = cards(driver, "#turns > .turn:nth-child(1) button.citation")[0]
    assert "verified" in cite.text and "bread/sourdough.md" in cite.text
    cite.click()
    wait(driver, lambda d: "with rye flour" in d.find_element(By.ID, "answer").text)

    box = driver.find_element(By.ID, "follow-up")
    box.send_keys("and what do I feed it?", Keys.ENTER)
    wait(driver, lambda d: cards(d, "#turns > .turn:nth-child(2) button.citation"))
    assert answer_text(driver, 2).startswith("Rye flour and water.")
    ids = [t.get_attribute("data-conversation") for t in turns(driver)]
    assert len(ids) == 2 and ids[0] and ids[0] == ids[1]
    assert [q for q, _, _ in fa.earlier_turns(sent[0])] == [QUESTION]
    assert QUESTION in turns(driver)[0].text and "what do I feed" in turns(driver)[1].text

    driver.find_element(By.ID, "new-conversation").click()
    assert not turns(driver) and not driver.find_element(By.ID, "answer").is_displayed()
    assert cards(driver, "#hits .card.hit")  # the search results stay
    driver.find_element(By.ID, "ask").click()
    wait(driver, lambda d: cards(d, "#turns > .turn button.citation"))
    again = [t.get_attribute("data-conversation") for t in turns(driver)]
    assert len(again) == 1 and again[0] not in ("", ids[0])


def test_a_turn_that_could_not_be_saved_is_followed_up_all_the_same(driver, site, tmp_path):
    """Issue 40, M2: a folder where the conversations file goes, so nothing is saved. The
    first answer says so and that the server keeps the conversation in memory; the
    follow-up continues it (the same id, no "no conversation" error)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _, served = site
    db = Path(shutil.copy(served.proc.args[served.proc.args.index("--db") + 1],
                          tmp_path / "unsaved.db"))
    Path(str(db) + ".conversations").mkdir()
    d = Daemon(db)
    try:
        driver.get(f"http://127.0.0.1:{d.port}/")
        driver.find_element(By.ID, "q").send_keys(QUESTION)
        driver.find_element(By.ID, "ask").click()
        wait(driver, lambda d: cards(d, "#turns > .turn:nth-child(1) button.citation"))
        first = turns(driver)[0]
        assert "kept in memory until this server stops" in first.text
        driver.find_element(By.ID, "follow-up").send_keys("and what do I feed it?", Keys.ENTER)
        wait(driver, lambda d: len(turns(d)) == 2 and
             turns(d)[1].get_attribute("aria-busy") == "false")
        assert not cards(driver, "#turns > .turn:nth-child(2) .error"), turns(driver)[1].text
        assert cards(driver, "#turns > .turn:nth-child(2) button.citation")
        ids = [t.get_attribute("data-conversation") for t in turns(driver)]
        assert ids[0] and ids[0] == ids[1]
    finally:
        assert d.stop() in (0, -15)


HOSTILE_ANSWER = ('<img src=x onerror="window.__pwned = 11"> <script>window.__pwned = 12</script> '
                  "[more](javascript:window.__pwned=13) [page](data:text/html,<b>x</b>)")


def test_the_kept_answer_renders_as_markdown_and_its_html_stays_text(driver, claude_site,
                                                                    fake):
    """The answer streams in as plain text, then is rendered as a note is (markdown.js):
    **bold** a <strong>, a list its <li>s, [[a note]] a link that opens it. The model's raw
    HTML stays text and its javascript: and data: links are dead: nothing runs, nothing
    live is made, the CSP is never even tried. Its citation still opens its lines."""
    from selenium.webdriver.common.by import By

    def styled(body):
        cited = fa.cite_text(body, sourdough(body), "twice")
        return fa.message(fa.text("You feed it **twice** a day, see [[rye bread]]:\n\n"
                                  "- in the morning\n- in the evening\n\n" + HOSTILE_ANSWER,
                                  [cited]))

    driver.get(claude_site + "/")
    watch_csp(driver)
    driver.find_element(By.ID, "q").send_keys(QUESTION)
    fake.push(styled)
    driver.find_element(By.ID, "ask").click()
    wait(driver, lambda d: cards(d, "#turns > .turn button.citation"))
    text = driver.find_element(By.CSS_SELECTOR, "#turns > .turn .text")
    found = lambda css: [e.text for e in text.find_elements(By.CSS_SELECTOR, css)]  # noqa: E731
    assert found("p strong") == ["twice"]
    assert found("ul > li") == ["in the morning", "in the evening"]
    assert '<img src=x onerror="window.__pwned = 11">' in text.text
    assert "<script>window.__pwned = 12</script>" in text.text
    assert found(".dead-link") == ["more", "page"] and text.text.rstrip().endswith("[1]")
    assert_nothing_live(driver)
    for e in text.find_elements(By.CSS_SELECTOR, ".dead-link"):
        e.click()
    assert_nothing_live(driver)
    cards(driver, "#turns > .turn button.citation")[0].click()
    wait(driver, lambda d: "with rye flour" in d.find_element(By.ID, "answer").text)
    text.find_element(By.LINK_TEXT, "rye bread").click()
    wait(driver, lambda d: "A dense rye loaf" in d.find_element(By.ID, "note").text)
    assert_nothing_live(driver)


def test_the_thread_is_beside_the_hits_on_a_wide_screen_and_above_them_on_a_narrow_one(
        driver, site):
    """Two columns at 1400 px (the hits, and the conversation beside them); one at
    700 px, the conversation first. The offline answer is one turn too."""
    from selenium.webdriver.common.by import By

    base, _ = site
    driver.get(base + "/")
    search(driver, "feed the sourdough starter")
    driver.find_element(By.ID, "ask").click()
    wait(driver, lambda d: cards(d, "#turns > .turn button.citation"))
    try:
        for width, beside in ((1400, True), (700, False)):
            driver.set_window_size(width, 1000)
            hits, thread = (driver.find_element(By.ID, i).rect for i in ("hits", "answer"))
            if beside:
                assert thread["x"] >= hits["x"] + hits["width"]
                assert thread["y"] < hits["y"] + hits["height"]
            else:
                assert thread["x"] == hits["x"]
                assert thread["y"] + thread["height"] <= hits["y"]
    finally:
        driver.set_window_size(1400, 1000)


TWO_ROOTS = {
    "v1/README.md": "# Readme\n\nThe shared readme mentions the garden compost.\n",
    "v2/README.md": "# Readme two\n\nThe second readme also mentions the garden compost and "
                    "tomatoes.\n",
    "v2/bread.md": "# Bread\n\nA loaf of rye bread wants a long proof.\n",
}


@pytest.fixture(scope="module")
def two_roots(tmp_path_factory, shared_embedder):
    """A daemon of two indexed folders that both hold README.md (issue 32, H3)."""
    top = tmp_path_factory.mktemp("roots")
    for rel, text in TWO_ROOTS.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text, encoding="utf-8")
    with Indexer(top / "r.db", embedder=shared_embedder) as ix:
        ix.index_paths([top / "v1", top / "v2"])
    d = Daemon(top / "r.db")
    yield f"http://127.0.0.1:{d.port}"
    assert d.stop() in (0, -15)


def test_two_folders_holding_one_path_are_told_apart(driver, two_roots):
    """Hit cards name their folder; an answer cites each README.md by its own folder,
    and opening a citation reads the lines of that note, not of its twin."""
    from selenium.webdriver.common.by import By

    driver.get(two_roots + "/")
    hits = search(driver, "readme garden compost")
    folders = {c.find_element(By.CSS_SELECTOR, "h2 .folder").text: card_path(c)
               for c in hits if card_path(c) == "README.md"}
    assert folders == {"v1/": "README.md", "v2/": "README.md"}
    driver.find_element(By.ID, "ask").click()
    wait(driver, lambda d: len(cards(d, "#answer button.citation")) == 2)
    shown = "following-sibling::div[contains(@class, 'passage')]"
    for cite in cards(driver, "#answer button.citation"):
        assert "verified" in cite.text
        folder = "v1/" if "v1/README.md" in cite.text else "v2/"
        cite.click()
        own = {"v1/": "The shared readme", "v2/": "The second readme"}[folder]
        other = {"v1/": "The second readme", "v2/": "The shared readme"}[folder]
        wait(driver, lambda d, c=cite, own=own: c.find_elements(By.XPATH, shown)
             and own in c.find_element(By.XPATH, shown).text)
        assert other not in cite.find_element(By.XPATH, shown).text


def test_the_open_link_keeps_hash_and_question_marks_in_the_file_name(driver, site):
    """Each path segment is encoded (issue 32, L18): "C# tips?.md" stays one file name."""
    base, _ = site
    driver.get(base + "/")
    href = wait(driver, lambda d: d.execute_script(  # once app.js has run
        "return typeof editorLink === 'function' && editorLink({root: "
        "'/home/u/notes/lang', path: 'C# tips?.md', start_line: 3}).getAttribute('href')"))
    assert href == "vscode://file//home/u/notes/lang/C%23%20tips%3F.md:3"
    parts = driver.execute_script("const u = new URL(arguments[0]); "
                                  "return [u.hash, u.search];", href)
    assert parts == ["", ""]


# The page's own two forms (search, follow-up) are the only forms it may hold.
LIVE = ("body script, iframe, svg, img, object, embed, form:not(#search-form, #follow-up-form), "
        "[onerror], [onload], [onclick], [onmouseover], [style], a[href^='javascript' i], "
        "a[href^='data' i], a[href^='vbscript' i], a[href*='javascript:' i]")


def assert_nothing_live(driver) -> None:
    """No payload ran, no element or attribute a payload needs exists, the CSP refused
    nothing (the page never even tried), and every link a note made is a web link or a
    note of this page."""
    assert driver.execute_script("return window.__pwned") is None
    assert not cards(driver, LIVE), [e.get_attribute("outerHTML") for e in cards(driver, LIVE)]
    assert driver.execute_script("return window.__violations") == []
    for a in cards(driver, ".md a"):
        href = a.get_attribute("href")
        assert href.startswith(driver.current_url.split("#")[0] + "#") or \
            href.startswith(("http://", "https://", "mailto:")), href


def watch_csp(driver) -> None:
    driver.execute_script(
        "window.__violations = []; document.addEventListener('securitypolicyviolation', "
        "(e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));")


def test_hostile_markup_is_shown_as_text(driver, site):
    from selenium.webdriver.common.by import By

    base, _ = site
    driver.get(base + "/")
    watch_csp(driver)
    hits = search(driver, "zeppelins pasted")
    card = next(h for h in hits if card_path(h) == "clips/hostile.md")
    assert "<script>window.__pwned = 1</script>" in card.text
    assert "<img src=x onerror=" in card.text
    assert_nothing_live(driver)
    card.find_element(By.CSS_SELECTOR, "button.read").click()
    wait(driver, lambda d: "Zeppelin facts" in d.find_element(By.ID, "note").text)
    note = driver.find_element(By.CSS_SELECTOR, "#note .md")
    for payload in ('<iframe src="javascript:window.__pwned = 3"></iframe>',
                    '<svg onload="window.__pwned = 4">', "window.__pwned = 7"):
        assert payload in note.text
    dead = [e.text for e in note.find_elements(By.CSS_SELECTOR, ".dead-link")]
    assert dead == ["js", "mixed", "entity", "space", "data", "vb",
                    "javascript:window.__pwned=9", "ref", "ctl", "tab", "esc"]
    for e in note.find_elements(By.CSS_SELECTOR, ".dead-link"):
        e.click()
    assert_nothing_live(driver)


def found_in(driver, css: str) -> list[str]:
    return [e.text for e in cards(driver, css)]


def linking_card(hits):
    """The hit of the hostile note whose passage holds its links to other notes."""
    from selenium.webdriver.common.by import By

    return next(h for h in hits if card_path(h) == "clips/hostile.md"
                and h.find_elements(By.CSS_SELECTOR, "a.note-link"))


def test_a_note_renders_as_markdown_and_its_links_open_notes(driver, site):
    from selenium.webdriver.common.by import By

    base, _ = site
    driver.get(base + "/")
    watch_csp(driver)
    card = linking_card(search(driver, "zeppelin facts hindenburg"))
    card.find_element(By.CSS_SELECTOR, "button.read").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#note .md h4"))
    note = driver.find_element(By.CSS_SELECTOR, "#note .md")
    found = lambda css: [e.text for e in note.find_elements(By.CSS_SELECTOR, css)]  # noqa: E731
    assert found("h3") == ["Hostile clipping"] and found("h4") == ["Zeppelin facts"]
    assert found("ul > li strong") == ["Hindenburg"] and found("ul > li em") == ["1936"]
    assert found("ul ul > li") == ["nested item"] and found("li.task") == [
        "☐ visit Friedrichshafen\nnested item"]
    assert found("ol > li") == ["first airship", "second airship"]
    assert found("table th") == ["Airship", "Length"]
    assert found("table td") == ["LZ 129", "245 m"]
    assert found("pre code.language-js") == ["window.__pwned = 7"]
    assert found("a.note-link") == ["Tomatoes › Side shoots", "the heap", "the tomato note"]
    assert_nothing_live(driver)
    # A wikilink opens its note in the reader, resolved as the indexer resolved it.
    note.find_element(By.LINK_TEXT, "the heap").click()
    wait(driver, lambda d: "Turn the compost heap" in d.find_element(By.ID, "note").text)
    assert card_path(driver.find_element(By.CSS_SELECTOR, "#note .card")) == \
        "garden/compost.md"
    # A markdown link to another note, relative to the one it is in, from a hit's card.
    card = linking_card(search(driver, "zeppelin facts hindenburg"))
    card.find_element(By.LINK_TEXT, "the tomato note").click()
    wait(driver, lambda d: "The tomato seedlings" in d.find_element(By.ID, "note").text)
    # [[Note#Heading]] opens the note at that heading.
    driver.find_element(By.CSS_SELECTOR, "#note button.close").click()
    card = linking_card(cards(driver, "#hits .card.hit"))
    card.find_element(By.PARTIAL_LINK_TEXT, "Side shoots").click()
    wait(driver, lambda d: "Pinch out the side shoots" in d.find_element(By.ID, "note").text)
    assert found_in(driver, "#note .md h4") == ["Side shoots"]
    assert_nothing_live(driver)


def test_slash_focuses_the_search_box(driver, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base, _ = site
    driver.get(base + "/")
    driver.find_element(By.TAG_NAME, "body").click()
    driver.find_element(By.TAG_NAME, "body").send_keys("/")
    assert driver.switch_to.active_element.get_attribute("id") == "q"
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)


def test_a_partly_embedded_index_says_so_in_one_line(driver, site, partial_daemon):  # noqa: F811
    """The server's partial_index over the hits (hybrid, vector; not bm25), and in the
    related panel; a whole index shows no such line."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base, _ = site
    driver.get(base + "/")
    search(driver, "feed the sourdough starter")
    assert not driver.find_element(By.ID, "partial").is_displayed()
    driver.get(f"http://127.0.0.1:{partial_daemon.port}/")
    search(driver, "sourdough dough")
    line = driver.find_element(By.ID, "partial")
    wait(driver, lambda d: line.is_displayed())
    assert "5 of 6 chunks embedded" in line.text and "`brainbot index`" in line.text
    Select(driver.find_element(By.ID, "mode")).select_by_value("bm25")
    wait(driver, lambda d: not line.is_displayed())
    search(driver, "sourdough dough")
    # The cards of the search the mode change started may still be replaced by those of
    # the typed one: the first card's button is looked up again until the click lands.
    wait(driver, lambda d: cards(d, "#hits .card.hit")[0].find_element(
        By.CSS_SELECTOR, "button.show-related").click() or True)
    wait(driver, lambda d: "related notes cover only the embedded chunks" in
         d.find_element(By.ID, "related").text)


def test_skip_reason_names_what_is_missing(monkeypatch):
    """Without chromium on PATH the reason says what to install."""
    monkeypatch.setenv("PATH", str(Path(os.devnull).parent / "nonexistent"))
    reason = browser_missing()
    assert reason and "chromium" in reason and "apt-get install" in reason


@pytest.mark.parametrize("require,outcome", [("1", "1 error"), ("0", "1 skipped")])
def test_missing_browser_fails_only_when_required(require, outcome, tmp_path):
    """BRAINBOT_REQUIRE_BROWSER=1 turns the skip into a failure (what .ci/run sets)."""
    import subprocess
    import sys

    env = {**os.environ, "PATH": str(tmp_path), "BRAINBOT_REQUIRE_BROWSER": require}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_slash_focuses_the_search_box"],
        env=env, capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert outcome in run.stdout, run.stdout[-2000:]
    assert "chromium not found (Debian: apt-get install chromium)" in run.stdout
