"""The page's markdown renderer on the inputs that were quadratic (issue 40, the wave-4
review's finding 4, and those the audit of markdown.js found): milliseconds by input size,
this tree's renderer beside an earlier one, each against plain prose of the same size.

What is measured: tests/js/time_markdown.js under node renders each input of
tests/test_markdown_render.py's LINEAR at N = 2k, 8k, 16k, 32k and 64k (the review's four
count runs of their unit: 64k of ``*a* `` is 256 KB; the others characters), through the
DOM stand-in the tests use (as the review timed it), wall-clock (--clock cpu: CPU time),
the least of --reps; before and after each render of the input, one of a paragraph of
"word " as long (the control, in the same process, so the machine's load falls on both).
An input whose render passes --max-ms at one size is not run at the larger ones (the old
renderer took minutes at 64k). --before names an earlier markdown.js (e.g. ``git show
main:brainbot/serve/static/markdown.js > /tmp/old.js``), timed in its own node process
right before this tree's.

Not measured: a browser's DOM and layout (benchmarks/bench_markdown.py has those, on real
notes), nor the CPU-time ratios the tests assert on.

    flock /tmp/brainbot-bench.lock .venv/bin/python benchmarks/bench_render_linear.py \\
        [--before /tmp/old.js] [--reps 3] [--max-ms 20000] [--clock cpu] [--case NAME]

Writes benchmarks/results/markdown_linear.json and prints one table a renderer.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
RESULTS = ROOT / "benchmarks" / "results" / "markdown_linear.json"
SIZES = (2_000, 8_000, 16_000, 32_000, 64_000)  # the review's table


def run(markdown: Path, names: list[str], args) -> dict:
    from test_markdown_render import LINEAR, TIMER

    job = {"markdown": str(markdown), "clock": args.clock, "dom": True, "reps": args.reps,
           "budget_ms": 1000, "max_ms": args.max_ms,
           "cases": [{"name": n, "sizes": [[s, LINEAR[n](s)] for s in SIZES]} for n in names]}
    out = subprocess.run(["node", str(TIMER)], input=json.dumps(job), text=True,
                         capture_output=True, check=True)
    return json.loads(out.stdout)


def table(label: str, got: dict) -> str:
    head = f"| {label} ({got['node']}) | " + " | ".join(f"N={s // 1000}k" for s in SIZES)
    rows = [head + " |", "|---" * (len(SIZES) + 1) + "|"]
    for case in got["cases"]:
        cells = {s["n"]: "fails: " + s["error"].split("\n")[0] if "error" in s
                 else f"{s['ms']:,.1f} ({s['control_ms']:,.1f})" for s in case["sizes"]}
        rows.append(f"| {case['name']} | " + " | ".join(cells.get(s, "—") for s in SIZES)
                    + " |")
    return "\n".join(rows)


def cpu_name() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() \
        else []
    names = [x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")]
    return f"{names[0] if names else platform.machine()}, {os.cpu_count()} CPUs"


def main() -> None:
    from test_markdown_render import LINEAR

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="an earlier markdown.js to time beside")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-ms", type=float, default=20_000)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this node process's CPU time, for a machine others load")
    ap.add_argument("--case", action="append", choices=sorted(LINEAR))
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    names = args.case or list(LINEAR)
    result = {"host": {"cpu": cpu_name(), "platform": platform.platform(),
                       "load_before": os.getloadavg()},
              "sizes": SIZES, "reps": args.reps, "max_ms": args.max_ms, "clock": args.clock,
              "renderers": {}}
    renderers = [("before", args.before)] if args.before else []
    renderers.append(("this tree", ROOT / "brainbot" / "serve" / "static" / "markdown.js"))
    for label, path in renderers:
        got = run(path, names, args)
        result["renderers"][label] = {"markdown_js": str(path), **got}
        print(table(label, got) + "\n", flush=True)
    result["host"]["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(args.out, "· ms (plain prose as long, ms) · load", result["host"]["load_before"],
          "→", result["host"]["load_after"])


if __name__ == "__main__":
    main()
