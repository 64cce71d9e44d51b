"""The onnxruntime session of the Embedder, made quick to create.

Creating a session over the plain export took 128 ms here (2 cores, median of 7 idle
runs): parsing 90 MB of protobuf and copying the weights, then packing the MatMul
weights for the CPU's GEMM; optimizing the graph itself was only ~3 ms of it (the same
graph saved pre-optimized, weights inline, loaded with optimizations off: 125 ms; in
onnxruntime's ORT format: 160 ms). What helps is onnxruntime saving the optimized graph
with its weights in an external data file, which it maps instead of copying (40 ms),
and the packed weights saved there too (23 ms). Vectors stay bit-identical.

So the first session on a machine saves that graph beside the export, checks it
bit-for-bit against a session over the export, and later sessions load it with graph
optimizations off. It holds fusions this onnxruntime chose and weights packed for this
CPU's kernels (onnxruntime warns that such a graph is hardware specific), so its file
name and sidecar carry the export's key (weights sha256, precision, EXPORT_VERSIONS), the
onnxruntime version and package, the CPU architecture and its flags (all of it in the
sidecar, compared field for field): a file made elsewhere is never used. Its two files
are trusted like the export, sha256 recorded at creation and checked by stat afterwards
(model.sha256_matches). When the graph cannot be made or does not match bit-for-bit, that
outcome is recorded and the plain export is used, optimized at load as before.

This module does not build the export (model/onnx_export.py) or tokenize (model/embed.py).
"""

from __future__ import annotations

import json
import os
import platform
import time
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from .files import cache_dir, sha256_file, sha256_matches
from .onnx_export import (
    DISABLED_OPTIMIZERS,
    EXPORT_VERSIONS,
    cache_name,
    check_batch,
    onnx_path,
    run_texts,
)
from .records import ModelRecord, record

# Bump when the way the optimized graph is made or checked changes.
FORMAT = 2  # 2: prepacked weights saved too
# Initializers above this many bytes go to the external data file (all the weight
# matrices and tables); the small constants stay inline in the graph.
EXTERNAL_MIN_BYTES = 1024
# A graph that onnxruntime failed to make is tried again after a day; making it
# costs about 0.35 s (measured), too much to retry in every query process.
RETRY_AFTER_S = 24 * 3600


@lru_cache(maxsize=1)
def machine() -> str:
    """This onnxruntime build, the CPU architecture and its flags, as one line."""
    import onnxruntime as ort

    flags = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):  # x86, ARM
                    flags = " ".join(sorted(line.split(":", 1)[1].split()))
                    break
    except OSError:
        pass
    package = getattr(getattr(ort.capi, "build_and_package_info", None), "package_name", "?")
    return f"{package} {ort.__version__} {platform.machine()}: {flags}"


def machine_key() -> str:
    """8 hex digits for file names; the sidecar holds machine() itself and is compared.

    crc32, not sha256: hashlib is imported by nothing else on the query path (2 ms).
    """
    return f"{zlib.crc32(machine().encode()):08x}"


def optimized_name(precision: str, model: ModelRecord | str | None = None) -> str:
    import onnxruntime as ort

    stem = cache_name(precision, model).removesuffix(".onnx")
    return f"{stem}-ort{ort.__version__}-{machine_key()}.opt.onnx"


def _expected(precision: str, model: ModelRecord | str | None = None) -> dict:
    """What a usable sidecar must say, field for field."""
    import onnxruntime as ort

    return {"format": FORMAT, "weights_sha256": record(model).weights_sha256, "precision": precision,
            "export_version": EXPORT_VERSIONS[precision], "onnxruntime": ort.__version__,
            "machine": machine()}


def session_options(threads: int, optimize: bool):
    """Options for our sessions; ``optimize`` False for an already optimized graph.

    Measured with the pre-optimized graph (median of 7 idle runs; creation 40 ms, first
    query 5.6 ms with these options): ORT_ENABLE_BASIC at load, one intra-op thread, no
    spinning, arena and memory patterns off, the env allocators: creation within 1 ms
    of it, and the first query as fast or up to 1.8 ms slower (one thread, no spinning);
    a whole `brainbot query` without spinning 0.265 s against 0.271 s, inside the noise.
    Disabling weight prepacking made creation 6 ms but moved vectors by 2e-7, and a
    short query ran 35 % slower (4.8 ms against 3.6), so it stays on. ``session.use_ort_model_bytes_directly``
    crashed from Python (the binding does not keep the bytes alive).

    Spinning off (``session.intra_op.allow_spinning`` 0; onnxruntime's default is on): its
    idle pool thread kept a core busy after each run, which on 2 cores the vector scan and
    the server's event loop then waited for. Warm `brainbot mcp` search at 100k chunks
    (bench_serve's 60 hybrid queries, Xeon 2 vCPUs, two runs each, interleaved): p95
    28.5 and 27.3 ms off against 31.4 and 39.2 on, p50 24.3 / 22.1 against 22.0 / 22.0;
    embedding and int8 scan in one process: 17-18 ms of process CPU a query off, 25-26 on.
    Indexing throughput (160 chunks of ~200 words, batch 8) 38.8-40.2 chunks/s off,
    29.2-41.7 on: no difference out of the noise. The vectors do not depend on it.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    level = ort.GraphOptimizationLevel
    options.graph_optimization_level = level.ORT_ENABLE_ALL if optimize else level.ORT_DISABLE_ALL
    return options


def open_session(precision: str, threads: int, model: ModelRecord | str | None = None):
    """An onnxruntime session of a model over its pre-optimized graph when usable, else
    over the export."""
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    path = optimized_path(precision, threads, model)
    if path is not None:
        try:
            return ort.InferenceSession(str(path), session_options(threads, False),
                                        providers=providers)
        except Exception:  # damaged below the file system: use the export
            pass
    return ort.InferenceSession(str(onnx_path(precision, model)), session_options(threads, True),
                                providers=providers,
                                disabled_optimizers=list(DISABLED_OPTIMIZERS[precision]))


def optimized_path(precision: str, threads: int,
                   model: ModelRecord | str | None = None) -> Path | None:
    """The checked pre-optimized graph, made first if needed; None when not usable."""
    expected = _expected(precision, model)
    path = cache_dir() / optimized_name(precision, model)
    data = path.with_name(path.name + ".data")
    try:
        meta = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        meta = None
    if isinstance(meta, dict) and {k: meta.get(k) for k in expected} == expected:
        if meta.get("usable") is False:
            # Vectors that differ will differ again; an error (a full disk, say) may not.
            made_at = meta.get("made_at")
            failed_at = made_at if isinstance(made_at, int) else 0
            if not meta.get("error") or time.time() - failed_at < RETRY_AFTER_S:
                return None
            return make_optimized(precision, threads, model)
        files = meta.get("sha256") or {}
        if (isinstance(files.get("graph"), str) and isinstance(files.get("data"), str)
                and sha256_matches(path, files["graph"]) and sha256_matches(data, files["data"])):
            return path
    return make_optimized(precision, threads, model)


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def make_optimized(precision: str, threads: int,
                   model: ModelRecord | str | None = None) -> Path | None:
    """Save, check and atomically cache the optimized graph; None when not usable.

    Written to a temporary folder, then moved in data file first, graph second, sidecar
    last: a crash in between leaves files whose sha256 the (old or missing) sidecar does
    not vouch for, so they are made again.
    """
    import tempfile

    folder = cache_dir()
    final = folder / optimized_name(precision, model)
    source = onnx_path(precision, model)  # exported and verified first if needed
    try:
        with tempfile.TemporaryDirectory(dir=folder, prefix=".optimize-") as tmp:
            graph = Path(tmp) / final.name
            data = graph.with_name(graph.name + ".data")
            meta = _expected(precision, model) | {"source": source.name, "made_at": int(time.time())}
            meta |= _save_and_check(source, graph, data, threads, precision, model)
            sidecar = Path(tmp) / "meta.json"
            sidecar.write_text(json.dumps(meta, indent=2) + "\n")
            if meta["usable"]:
                os.replace(data, final.with_name(data.name))
                os.replace(graph, final)
            os.replace(sidecar, _sidecar(final))
    except OSError:
        return None  # an unwritable cache: the plain export still works
    return final if meta["usable"] else None


def _save_and_check(source: Path, graph: Path, data: Path, threads: int, precision: str,
                    model: ModelRecord | str | None = None) -> dict:
    """Optimize ``source`` into ``graph`` + ``data`` and compare the two sessions."""
    import onnxruntime as ort

    options = session_options(threads, True)
    options.optimized_model_filepath = str(graph)
    # Its warning that the saved graph may be hardware specific is why machine_key exists.
    options.log_severity_level = 3
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                     data.name)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", str(EXTERNAL_MIN_BYTES))
    # The MatMul weights as the CPU kernels want them (packed for this CPU's GEMM), saved
    # too: loading maps them instead of packing again. Measured: session 23 ms instead of
    # 41 ms, bit-identical vectors; the data file grows from 90 to 133 MB.
    options.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    providers = ["CPUExecutionProvider"]
    try:
        reference = ort.InferenceSession(str(source), options, providers=providers,
                                         disabled_optimizers=list(DISABLED_OPTIMIZERS[precision]))
        candidate = ort.InferenceSession(str(graph), session_options(threads, False),
                                         providers=providers)
        same = all(np.array_equal(run_texts(reference, ids, mask), run_texts(candidate, ids, mask))
                   for ids, mask in _check_inputs(model))
    except Exception as exc:  # onnxruntime's errors share no common base class
        return {"usable": False, "error": True, "reason": f"onnxruntime: {exc}"[:500]}
    if not same:
        return {"usable": False, "reason": "vectors differ from the export's"}
    return {"usable": True, "sha256": {"graph": sha256_file(graph), "data": sha256_file(data)}}


def _check_inputs(model: ModelRecord | str | None = None):
    """export's check texts as one padded batch, and its first two rows alone."""
    ids, mask = check_batch(model)
    width = int(mask[:2].sum(1).max())
    return [(ids, mask), (ids[:2, :width].copy(), mask[:2, :width].copy())]

