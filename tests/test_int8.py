"""int8 embeddings (issue #33): a text's vector is a function of the text alone, close to
fp32, the default of a new index; an index keeps the precision it was built with, and
one built by the batch-dependent int8 of before is refused, its vectors never reused.

The int8 graph is model/int8_graph.py, its numpy twin model/twin.py. The crash lab
(test_crash.py) runs the CLI's default, int8: kill and resume give a clean index's bytes.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sqlean
from conftest import DATA, need_shared
from reliability_kit import meta_value

from brainbot.errors import ExportError, IdentityMismatchError, ModelFilesError
from brainbot.index.indexer import Indexer
from brainbot.model import onnx_export as export
from brainbot.model.embed import Embedder

try:
    from brainbot.model.files import verified_model_dir

    verified_model_dir()
except ModelFilesError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"model files unavailable: {exc}", allow_module_level=True)

RUST_BOOK = DATA / "corpora" / "rust-book" / "src"
# Texts of very different lengths (fp32 would pad a short one far past its own length in
# a batch of mixed lengths), empty ones, and a long one truncated at 256 wordpieces.
TEXTS = (["hello world", "a", "", "ünïcødé 漢字 😀 — naïve café", "x " * 400]
         + [f"Note {i}: " + "the quick brown fox jumps over the lazy dog " * (i % 9 + 1) for i in range(19)])


@pytest.fixture(scope="module")
def int8():
    return Embedder("int8")


def _real_chunks(n: int) -> list[str]:
    """n paragraphs-grouped chunks of ~150-200 words from the Rust book, spread evenly."""
    chunks = []
    for path in sorted(need_shared(RUST_BOOK).glob("*.md")):
        words, parts = 0, []
        for para in path.read_text(encoding="utf-8").split("\n\n"):
            parts.append(para)
            words += len(para.split())
            if words >= 150:
                chunks.append("\n\n".join(parts))
                words, parts = 0, []
    return chunks[:: max(1, len(chunks) // n)][:n]


# -- the vector is a function of the text -------------------------------------------------


def test_a_texts_int8_vector_has_the_same_bytes_alone_in_any_batch_order_and_thread_count(int8):
    together = int8.embed(TEXTS)
    alone = np.stack([int8.embed([t])[0] for t in TEXTS])
    order = list(range(len(TEXTS)))
    random.Random(7).shuffle(order)
    shuffled = np.empty_like(together)
    shuffled[order] = int8.embed([TEXTS[i] for i in order])
    three = Embedder("int8", threads=3)  # three runs at once over the shared session
    three._tokenizer, three._session = int8._load()
    one_thread = Embedder("int8", threads=1).embed(TEXTS)
    two_threads = Embedder("int8", threads=2).embed(TEXTS[::-1])[::-1]
    for how, other in (("alone", alone), ("shuffled", shuffled), ("three at once", three.embed(TEXTS)),
                       ("one thread", one_thread), ("two threads, reversed", two_threads)):
        assert together.tobytes() == other.tobytes(), how


def test_the_int8_graph_takes_whole_texts_and_attends_without_a_mask():
    """Export version 3: no attention_mask input, and MultiHeadAttention gets no key
    padding mask (onnxruntime takes its flash-attention kernel only without one)."""
    import onnx

    model = onnx.load(str(export.onnx_path("int8")))
    assert [i.name for i in model.graph.input] == ["input_ids"]
    attention = [n for n in model.graph.node if n.op_type == "MultiHeadAttention"]
    assert len(attention) == 6
    assert all(len([x for x in n.input if x]) == 3 for n in attention)  # query, key, value


def test_int8_runs_each_text_alone_as_many_at_once_as_it_has_threads(int8):
    """Two runs at once on two threads: each run waits at a barrier for the other, which a
    one-at-a-time loop would never reach (the wait is bounded, and then fails)."""
    import threading

    tokenizer, session = int8._load()
    barrier = threading.Barrier(2, timeout=60)
    seen: list[tuple[int, ...]] = []

    class Pair:
        def run(self, names, feed):
            assert set(feed) == {"input_ids"} and feed["input_ids"].shape[0] == 1
            seen.append(feed["input_ids"].shape)
            barrier.wait()
            return session.run(names, feed)

    two = Embedder("int8", threads=2)
    two._tokenizer, two._session = tokenizer, Pair()
    texts = ["a short one", "a somewhat longer text about ownership and borrowing", "x", "y y"]
    assert two.embed(texts).tobytes() == int8.embed(texts).tobytes()
    assert sorted(shape[1] for shape in seen) == sorted(len(e.ids) for e in tokenizer.encode_batch(texts))


def test_int8_is_close_to_fp32_on_real_chunks(int8, shared_embedder):
    chunks = _real_chunks(64)
    cos = (int8.embed(chunks).astype(np.float64) * shared_embedder.embed(chunks)).sum(1)
    assert cos.min() >= 0.99, f"min cosine {cos.min():.4f}"  # the floor; 0.994 measured
    assert cos.mean() >= 0.995


def test_the_int8_graph_computes_what_its_numpy_twin_does(tmp_path):
    """One layer against model/twin.py (integer products exact, per-token scales): past
    one layer, rounding flips in the last bits compound (twin.py), so the whole model is
    held to fp32 instead (verify(), the test above)."""
    import onnx

    from brainbot.model.int8_graph import build_int8_graph
    from brainbot.model.twin import numpy_forward_int8

    weights = export.load_weights()
    maxima = export.calibration_maxima(weights)
    path = tmp_path / "one-layer.onnx"
    onnx.save(build_int8_graph(weights, 0, maxima, layers=1), path)
    ids, mask = export.check_batch()
    got = export.run_session(path, ids, mask, precision="int8")
    cos = (got.astype(np.float64) * numpy_forward_int8(weights, ids, mask, maxima, layers=1)).sum(1)
    assert cos.min() >= 0.99999, cos  # 0.999998 measured


def test_verify_refuses_int8_vectors_that_change_with_the_batch(tmp_path):
    """A graph whose vectors carry something of the batch (here its first text) fails the
    export's check, even when each vector is close to fp32."""
    weights = export.load_weights()

    def batch_dependent(path, ids, mask, threads=None):
        v = export.numpy_forward(weights, ids, mask) + 1e-4 * ids[0, 1]
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    with pytest.raises(ExportError, match="vectors change with the batch"):
        export.verify(tmp_path / "x.onnx", "int8", weights, runner=batch_dependent)


def test_the_int8_export_has_a_new_cache_name_and_fingerprint():
    """Old int8 files (v1: onnxruntime's dynamic quantization; v2: padded batches under a
    mask) are never loaded again and indexes made with them are told apart."""
    assert export.cache_name("int8").endswith("-int8-v3.onnx")
    assert Embedder("int8").fingerprint.endswith(":int8:onnx-v3")
    assert Embedder("fp32").fingerprint.endswith(":fp32:onnx-v1")  # fp32 indexes stay valid


# -- the precision of an index --------------------------------------------------------------


def _embedder_meta(db: Path) -> str | None:
    return meta_value(db, "embedder")


def _set_embedder_meta(db: Path, value: str) -> None:
    conn = sqlean.connect(str(db))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'embedder'", (value,))
    conn.commit()
    conn.close()


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "brainbot", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def test_a_new_index_is_int8_and_its_query_is_embedded_at_int8(tmp_path, vault):
    db = tmp_path / "n.db"
    run = _cli("index", vault, "--db", db, "--json")
    assert run.returncode == 0, run.stderr
    assert _embedder_meta(db) == Embedder("int8").fingerprint
    from brainbot.search.searcher import Searcher

    with Searcher(db) as s:
        assert s.embedder.precision == "int8"
        assert [h.path for h in s.search("tomatoes need sun", 1, mode="vector")] == ["sub/beta.md"]


def test_an_fp32_index_stays_fp32_without_a_flag(tmp_path, vault, shared_embedder):
    db = tmp_path / "f.db"
    with Indexer(db, precision="fp32", embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    (vault / "delta.md").write_text("# Delta\n\nA fig tree by the wall.\n", encoding="utf-8")
    run = _cli("index", vault, "--db", db, "--json")
    assert run.returncode == 0, run.stderr
    assert _embedder_meta(db) == Embedder("fp32").fingerprint
    run = _cli("index", vault, "--db", db, "--rebuild", "--json")  # a rebuild keeps it too
    assert run.returncode == 0, run.stderr
    assert _embedder_meta(db) == Embedder("fp32").fingerprint
    from brainbot.search.searcher import Searcher

    with Searcher(db) as s:
        assert s.embedder.precision == "fp32"


@pytest.mark.parametrize(("version", "why"), [(1, "depend on the texts"), (2, "an earlier int8 graph")])
def test_an_index_of_an_earlier_int8_is_refused_and_its_vectors_not_reused(
        tmp_path, vault, shared_embedder, version, why):
    db = tmp_path / "old.db"
    with Indexer(db, precision="fp32", embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    ours = f":onnx-v{export.EXPORT_VERSIONS['int8']}"
    old = Embedder("int8").fingerprint.replace(ours, f":onnx-v{version}")  # as brainbot wrote it
    _set_embedder_meta(db, old)
    with pytest.raises(IdentityMismatchError, match=why) as caught:
        with Indexer(db):
            pass
    assert "--rebuild" in str(caught.value)
    run = _cli("index", vault, "--db", db)
    assert run.returncode != 0 and "--rebuild" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert _salvageable(db) == 0  # a rebuild embeds everything again
    run = _cli("index", vault, "--db", db, "--rebuild", "--json")
    assert run.returncode == 0, run.stderr
    assert _embedder_meta(db) == Embedder("int8").fingerprint
    # The salvage kept none of the old vectors (fp32 ones here, under the old label): every
    # stored vector is the new int8 graph's for its text, as a clean index would hold.
    texts, stored = _stored_vectors(db)
    assert stored.tobytes() == Embedder("int8").embed(texts).astype("<f4").tobytes()
    assert _salvageable(db) == len(set(texts))  # its own vectors are reusable


def _salvageable(db: Path) -> int:
    """How many of the index's texts a --rebuild at int8 would take the vectors of."""
    from brainbot.store.identity import current
    from brainbot.store.sqlite.salvage import Salvage

    conn = sqlean.connect(str(db))
    try:
        hashes = [h for (h,) in conn.execute("SELECT text_sha256 FROM chunks")]
    finally:
        conn.close()
    salvage = Salvage(db, current("int8"))
    try:
        return len(salvage.vectors(hashes))
    finally:
        salvage.close()


def _stored_vectors(db: Path) -> tuple[list[str], np.ndarray]:
    conn = sqlean.connect(str(db))
    try:
        rows = conn.execute("SELECT c.retrieval_text, e.vector FROM chunks c JOIN embeddings e "
                            "ON e.chunk = c.id ORDER BY c.id").fetchall()
    finally:
        conn.close()
    return [t for t, _ in rows], np.stack([np.frombuffer(v, dtype="<f4") for _, v in rows])


# -- a CPU without VNNI ---------------------------------------------------------------------

QEMU_CHILD = """
import sys
import numpy as np, onnxruntime as ort
path, out = sys.argv[1], sys.argv[2]
with np.load(sys.argv[3]) as batch:
    ids, mask = batch["ids"], batch["mask"]
options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"],
                               disabled_optimizers=["SkipLayerNormFusion"])
np.save(out, np.concatenate([session.run(None, {"input_ids": row[None, :n]})[0]
                            for row, n in zip(ids, mask.sum(1))]))
"""


def test_weights_stored_unsigned_give_a_cpu_without_vnni_the_exact_products(tmp_path):
    """Under `qemu-x86_64 -cpu Haswell` (AVX2, no VNNI), onnxruntime's u8 x s8 kernel
    saturates (int8_graph.unsigned_weights), so such a CPU gets the weights as uint8. Here
    the uint8 and int8 forms give the same bytes (the same exact integer products); there
    the uint8 form stays within the float steps' differences of this host's vectors
    (which each layer's rounding amplifies: cosine 0.99995 on the longest check text),
    where signed weights fall to 0.995. Skips without qemu-x86_64 or off x86-64."""
    import platform
    import shutil

    import onnx

    from brainbot.model.int8_graph import build_int8_graph

    qemu = shutil.which("qemu-x86_64")
    if qemu is None or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("qemu-x86_64 on an x86-64 host emulates the CPU without VNNI")
    weights = export.load_weights()
    maxima = export.calibration_maxima(weights)
    ids, mask = export.check_batch()
    np.savez(tmp_path / "batch.npz", ids=ids, mask=mask)
    got = {}
    for kind in ("signed", "unsigned"):
        path = tmp_path / f"{kind}.onnx"
        onnx.save(build_int8_graph(weights, 0, maxima, unsigned=kind == "unsigned"), path)
        for where, prefix in (("here", []), ("haswell", [qemu, "-cpu", "Haswell"])):
            out = tmp_path / f"{kind}-{where}.npy"
            run = subprocess.run([*prefix, sys.executable, "-c", QEMU_CHILD, str(path), str(out),
                                  str(tmp_path / "batch.npz")], capture_output=True, text=True,
                                 timeout=900)
            assert run.returncode == 0, run.stderr[-2000:]
            got[kind, where] = np.load(out)
    assert got["signed", "here"].tobytes() == got["unsigned", "here"].tobytes()
    here = got["signed", "here"].astype(np.float64)
    cos = {kind: (got[kind, "haswell"] * here).sum(1) for kind in ("signed", "unsigned")}
    assert cos["unsigned"].min() >= 0.9999, cos  # 0.99995 measured: the float steps only
    assert cos["signed"].max() < cos["unsigned"].min(), cos  # saturated: 0.995-0.996
