"""Take docs/page.png: the page of `brainbot serve` over examples/notes, in the same headless
chromium the browser test drives (tests/test_browser.py), with a search and, beside its hits,
a conversation of two turns (a question, then a follow-up that means nothing alone) with a
verified citation opened, and a note with its related notes, each note's markdown rendered.

    python docs/screenshot.py [--db FILE] [--out docs/page.png]

Without --db, examples/notes is indexed into a temporary folder first (a few minutes on
two cores). Needs chromium, chromium-driver and selenium (`make browser`, the test extras).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

QUERY = "What do I make with the sourdough discard?"
FOLLOW_UP = "how long do the crackers keep?"  # examples/conversations.jsonl


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(db: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "brainbot", "serve", "--db", str(db),
                             "--port", str(port)])
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/health", timeout=1).read()
            return proc, base
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("brainbot serve did not start")


def shoot(base: str, out: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from test_browser import cards, chrome, search, wait

    driver = chrome(1400, 1500)
    try:
        driver.get(base + "/")
        search(driver, QUERY)
        driver.find_element(By.ID, "ask").click()
        wait(driver, lambda d: cards(d, "#turns > .turn:nth-child(1) button.citation"))
        driver.find_element(By.ID, "follow-up").send_keys(FOLLOW_UP, Keys.ENTER)
        second = "#turns > .turn:nth-child(2) button.citation"
        wait(driver, lambda d: cards(d, second))
        cards(driver, second)[0].click()
        wait(driver, lambda d: cards(d, "#answer .passage .md h3, #answer .passage .md p, "
                                        "#answer .passage .md li"))
        hits = cards(driver, "#hits .card.hit")
        hits[0].find_element(By.CSS_SELECTOR, "button.read").click()
        wait(driver, lambda d: cards(d, "#related .card.related"))
        driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
        time.sleep(0.3)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="an index of examples/notes (built if absent)")
    ap.add_argument("--out", default=str(REPO / "docs" / "page.png"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "notes.db"
        if not db.exists():
            subprocess.run([sys.executable, "-m", "brainbot", "index",
                            str(REPO / "examples" / "notes"), "--db", str(db)], check=True)
        proc, base = start(db)
        try:
            shoot(base, Path(args.out))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(args.out)


if __name__ == "__main__":
    main()
