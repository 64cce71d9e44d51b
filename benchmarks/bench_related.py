"""Related notes: how often a note's own links are among its related notes.

For every note of a vault with at least one resolved link to or from another note, the
related notes are computed three ways, and the share of its linked notes found in the top
5 and top 10 is counted (micro: over all links; macro: notes with at least one linked
note in the top k). Links are a proxy for relatedness, not the truth: a person links what
they thought of, and a note on the same topic they never linked is what `--unlinked`
is for.

- ``max``: a note's best chunk-to-chunk cosine with the note (brainbot's default);
- ``mean``: a note's best chunk against the note's mean vector (one query);
- ``centroid``: mean vector against mean vector (computed here only, for comparison).

    python benchmarks/bench_related.py [--vault DIR --db FILE]... [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def linked_notes(store) -> dict[int, set[int]]:
    """{note id: the notes it links to or that link to it}, notes with at least one."""
    out = {}
    for doc in store.documents():
        linked = store.linked_documents(doc.id)
        if linked:
            out[doc.id] = linked
    return out


def centroid_ranking(store) -> dict[int, list[int]]:
    """{note id: other note ids, by mean-vector cosine, best first}."""
    ids, means = [], []
    for doc in store.documents():
        vecs = [v for _, v in store.document_vectors(doc.id) if v is not None]
        if vecs:
            m = np.mean(np.stack(vecs), axis=0)
            ids.append(doc.id)
            means.append(m / np.linalg.norm(m))
    matrix = np.stack(means)
    sims = matrix @ matrix.T
    out = {}
    for i, d in enumerate(ids):
        order = [ids[j] for j in np.argsort(-sims[i], kind="stable") if ids[j] != d]
        out[d] = order
    return out


def score(rankings: dict[int, list[int]], links: dict[int, set[int]]) -> dict:
    res = {}
    for k in (5, 10):
        found = total = notes_hit = 0
        for d, linked in links.items():
            top = set(rankings.get(d, [])[:k])
            n = len(top & linked)
            found += n
            total += len(linked)
            notes_hit += n > 0
        res[f"links_in_top{k}"] = round(found / total, 4)
        res[f"notes_with_a_link_in_top{k}"] = round(notes_hit / len(links), 4)
    return res


def measure(db: Path) -> dict:
    from brainbot.search.related import related
    from brainbot.store.target import open_store

    with open_store(db) as store:
        links = linked_notes(store)
        paths = {d.id: d for d in store.documents()}
        methods = {}
        for method in ("max", "mean"):
            t0 = time.perf_counter()
            rankings = {}
            for d in links:
                doc = paths[d]
                report = related(store, f"{doc.root}::{doc.path}", 10, method=method)
                rankings[d] = [r.document.id for r in report.related]
            ms = (time.perf_counter() - t0) * 1000 / len(links)
            methods[method] = {**score(rankings, links), "ms_per_note": round(ms, 2)}
        methods["centroid"] = score(centroid_ranking(store), links)
        return {"notes": len(paths), "notes_with_links": len(links),
                "links": sum(len(v) for v in links.values()),
                "chunks": store.chunk_count(), "methods": methods}


def cpu_name() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() \
        else []
    names = [x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")]
    return names[0] if names else platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vault", action="append", help="a vault (repeatable; default "
                    "examples/vault and examples/notes)")
    ap.add_argument("--db", action="append", default=[],
                    help="an index of the vault given in the same position (built in a "
                         "temporary folder if absent)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "related.json"))
    args = ap.parse_args()
    vaults = args.vault or [str(REPO / "examples" / "vault"), str(REPO / "examples" / "notes")]
    out = {"cpu": cpu_name(), "vaults": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i, vault in enumerate(vaults):
            db = Path(args.db[i]) if i < len(args.db) else Path(tmp) / f"vault{i}.db"
            if not db.exists():
                from brainbot.index.indexer import Indexer

                with Indexer(db) as ix:
                    ix.index_paths([Path(vault)])
            where = Path(vault).resolve()
            name = str(where.relative_to(REPO)) if where.is_relative_to(REPO) else vault
            out["vaults"].append({"vault": name, **measure(db)})
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
