"""`brainbot mcp --watch` on a vault it has never indexed, driven by the official MCP
client over stdio, as an agent's first session would be.

It measures, from the spawn of the server:
- the handshake;
- the first bm25 hit on the vault's last note (by path);
- fully embedded (`status` without partial_index).
While the semantic phase still runs, it also measures how long a saved edit (a new word
in a note) takes to become a bm25 hit. Before the background semantic phase, that edit
waited for the whole embedding backlog.

    python benchmarks/bench_watch_first.py [--vault DIR] [--out FILE] [--embed-wait S]

Each vault's latest run is kept in the results file. ``--embed-wait S`` stops waiting for the semantic phase after S seconds and records how
far it got (a shared 2-core machine under load embeds at a fraction of its idle speed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_VAULT = HERE.parents[1] / "shared" / "data" / "corpora" / "dwarves-brain"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    p.add_argument("--out", type=Path, default=HERE / "results" / "watch_first.json")
    p.add_argument("--embed-wait", type=float, default=3600.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(shutil.copytree(args.vault, Path(tmp) / "vault"))
        result = measure(vault, Path(tmp) / "w.db", args.embed_wait)
    vault = args.vault.resolve()
    name = (vault.relative_to(HERE.parent).as_posix() if vault.is_relative_to(HERE.parent)
            else vault.name)
    result.update(vault=name, cpu=_cpu(), load_start=result.pop("load"),
                  load_end=os.getloadavg()[0])
    print(json.dumps(result, indent=2))
    runs = json.loads(args.out.read_text())["runs"] if args.out.exists() else {}
    runs[name] = result  # one run per vault, the latest kept
    args.out.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    return 0


def measure(vault: Path, db: Path, embed_wait: float) -> dict:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    notes = sorted(p for p in vault.rglob("*.md") if p.is_file())
    last = notes[-1]
    with last.open("a") as f:  # a word of its own, to find it by (the copy is ours)
        f.write("\n\nThe vorpalquince marker.\n")
    probe = "zyxquorble"  # a word no note holds
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    params = StdioServerParameters(command=sys.executable, env=env, args=[
        "-m", "brainbot", "mcp", "--db", str(db), "--watch", str(vault)])
    out: dict = {"notes": len(notes), "load": os.getloadavg()[0]}

    async def hits(s, query):
        r = await s.call_tool("search", {"query": query, "mode": "bm25", "k": 3})
        return r.structured_content["hits"]

    async def run():
        t0 = time.perf_counter()
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                out["handshake_s"] = time.perf_counter() - t0
                rel = last.relative_to(vault).as_posix()
                while rel not in [h["path"] for h in await hits(s, "vorpalquince")]:
                    await anyio.sleep(0.1)
                out["last_note_bm25_hit_s"] = time.perf_counter() - t0
                edited = notes[len(notes) // 2]
                with edited.open("a") as f:
                    f.write(f"\n\nThe {probe} lantern.\n")
                t_edit = time.perf_counter()
                while not await hits(s, probe):
                    await anyio.sleep(0.05)
                out["edit_to_bm25_hit_s"] = time.perf_counter() - t_edit
                status = (await s.call_tool("status", {})).structured_content
                out["embedded_at_edit_hit"] = status["embedded"]
                print(json.dumps(out), file=sys.stderr, flush=True)
                deadline = time.perf_counter() + embed_wait
                while "partial_index" in status and time.perf_counter() < deadline:
                    await anyio.sleep(1.0)
                    status = (await s.call_tool("status", {})).structured_content
                if "partial_index" not in status:
                    out["fully_embedded_s"] = time.perf_counter() - t0
                out["embedded_at_end"] = status["embedded"]
                out["seconds_at_end"] = time.perf_counter() - t0

    anyio.run(run)
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip() + f", {os.cpu_count()} CPUs"
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
