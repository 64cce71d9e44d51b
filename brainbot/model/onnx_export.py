"""A model record's ONNX file, built from its weights without torch, checked and cached:
all-MiniLM-L6-v2 from model.safetensors, multilingual-e5-small from its E5S1 file
(``model/e5s1.py``), both through the one BERT graph builder.

The graphs are written node by node: fp32 in ``model/graph.py`` (it matches
sentence-transformers), int8 in ``model/int8_graph.py`` (per-token activation scales: a
text's vector is a function of that text alone, issue #33). fp32's inputs are
``input_ids`` and ``attention_mask`` (int64 [batch, seq], seq <= 512); int8's only
``input_ids``, one whole text a row (``run_texts`` feeds either); output
``sentence_embedding`` (float32 [batch, 384]).

Exports are cached in ``$BRAINBOT_CACHE_DIR`` (else ``$XDG_CACHE_HOME/brainbot``, else
``~/.cache/brainbot``), keyed by the model, its weights' sha256, the precision and its
``EXPORT_VERSIONS`` entry. A new export is checked before it is cached: fixed texts are
run through onnxruntime and compared with a numpy forward pass of the same weights
(``model/twin.py``) and, for MiniLM's fp32, with values stored from sentence-transformers; int8 is
also run in another order and on one and two threads, and must give the same bytes
each way. A cached file is checked against the sha256 recorded beside it, and
rebuilt when they differ.

This module does not tokenize or batch (see ``model/embed.py``) and never touches the network.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from brainbot.errors import ExportError, InputError

from .files import cache_dir, sha256_file, sha256_matches, verified_model_dir, weights_path
from .graph import HEADS, HIDDEN, INTERMEDIATE, MAX_POSITIONS, OPSET, build_graph
from .records import MINILM, ModelRecord, record

PRECISIONS = ("fp32", "int8")
# Bump a precision's entry when its graph changes: its old cache files are then ignored,
# never reused, and the index fingerprint (`embedder`) changes with it. int8 2: per-token
# activation scales (1 was onnxruntime's dynamic quantization, one scale per batch); 3: one
# unpadded text a run, no attention mask (flash attention; int8_graph.py).
EXPORT_VERSIONS = {"fp32": 1, "int8": 3}
# onnxruntime graph optimizers each precision's sessions run without.
DISABLED_OPTIMIZERS = {"fp32": (), "int8": ("SkipLayerNormFusion",)}

# Texts run through every new export before it is cached (short, long, unicode, code).
CHECK_TEXTS = (
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Straße, Grüße aus München! 机器学习 🚀",
    "def embed(texts):\n    return [tok.encode(t) for t in texts]  # " + "note " * 40,
)
# sentence-transformers' embedding of "hello world", first 8 of 384 dimensions
# (../shared/reference/minilm_reference.jsonl, rounded to 6 decimals).
HELLO_WORLD_HEAD = (-0.034477, 0.031023, 0.006735, 0.026109,
                    -0.039362, -0.160302, 0.066924, -0.006441)
# fp32 vs the numpy forward pass: measured max abs difference ~3e-7 (MiniLM), ~6e-7
# (multilingual-e5-small, twelve layers).
FP32_ATOL = 1e-5
# int8 on CHECK_TEXTS, each text alone, against the numpy fp32 forward pass: measured min
# cosine 0.992 here ("hello world"; the target on real chunks is 0.99). The floor catches
# a broken graph, not a merely imprecise one.
INT8_MIN_COSINE = 0.98


# -- cache -------------------------------------------------------------------------


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")


def cache_name(precision: str = "fp32", model: ModelRecord | str | None = None) -> str:
    """The export's file name: model, weights, precision, version, and for int8 on an x86
    CPU without VNNI "-u8w" (its weights stored as uint8: int8_graph.unsigned_weights; the
    vectors are those of the signed weights)."""
    _check_precision(precision)
    spec = record(model)
    variant = "-u8w" if precision == "int8" and _unsigned() else ""
    return (f"{spec.cache_key}-{spec.weights_sha256[:16]}-{precision}"
            f"-v{EXPORT_VERSIONS[precision]}{variant}.onnx")


def _unsigned() -> bool:
    from .int8_graph import unsigned_weights

    return unsigned_weights()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def cached_file_ok(path: Path) -> bool:
    """True when ``path`` and its sidecar exist and the file's sha256 matches.

    Hashed once, then trusted by stat (model.sha256_matches): hashing this 90 MB file
    cost about 45 ms in every process that embedded a query (measured, SHA-NI).
    """
    try:
        meta = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        return False
    expected = meta.get("sha256") if isinstance(meta, dict) else None
    if not isinstance(expected, str):
        return False
    return sha256_matches(path, expected)


def onnx_path(precision: str = "fp32", model: ModelRecord | str | None = None) -> Path:
    """The cached, verified ONNX file of a model at ``precision``, exported first if needed.

    A cached file whose sha256 does not match its sidecar (truncated, edited, half
    written) is exported again.
    """
    path = cache_dir() / cache_name(precision, model)
    if not cached_file_ok(path):
        export(path, precision, model)
    return path


# -- export --------------------------------------------------------------------------


def export(out_path: Path | str, precision: str = "fp32",
           model: ModelRecord | str | None = None) -> dict:
    """Build, verify and atomically write a model's ONNX graph; return what was recorded.

    Raises ExportError when the graph cannot be built or fails verification; nothing is
    left at ``out_path`` in that case.
    """
    import tempfile

    _check_precision(precision)
    out_path = Path(out_path)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the ONNX cache folder {out_path.parent}: {exc}") from exc
    spec = record(model)
    started = time.perf_counter()
    weights = load_weights(spec)
    version = EXPORT_VERSIONS[precision]
    doc = f"{spec.model_id}, weights sha256 {spec.weights_sha256}"
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export-") as tmp:
        final = Path(tmp) / f"{precision}.onnx"
        if precision == "int8":
            _save(_int8_graph(weights, version, spec, doc), final)
        else:
            _save(build_graph(weights, version, doc), final)
        report = verify(final, precision, weights, model=spec)
        report.update(
            model=spec.model_id, weights_sha256=spec.weights_sha256, precision=precision,
            export_version=version, opset=OPSET, sha256=sha256_file(final),
            export_seconds=round(time.perf_counter() - started, 3),
        )
        sidecar_tmp = Path(tmp) / "meta.json"
        sidecar_tmp.write_text(json.dumps(report, indent=2) + "\n")
        # The model first, then its sidecar: a crash in between leaves a file without
        # a matching sidecar, which onnx_path() treats as missing.
        os.replace(final, out_path)
        os.replace(sidecar_tmp, _sidecar(out_path))
    return report


def _int8_graph(weights: dict, version: int, spec: ModelRecord, doc: str):
    from .int8_graph import build_int8_graph

    return build_int8_graph(weights, version, calibration_maxima(weights, spec),
                            unsigned=_unsigned(), doc=doc)


def calibration_maxima(weights: dict, model: ModelRecord | str | None = None) -> dict[str, np.ndarray]:
    """The int8 graph's smoothing calibration: each smoothed input's largest |value| per
    channel over int8_graph.CALIBRATION_TEXTS (with the model's passage prefix), each
    text alone through the numpy fp32 model (twin.calibration_maxima)."""
    from .int8_graph import CALIBRATION_TEXTS
    from .twin import calibration_maxima as maxima

    ids, mask = padded_batch(CALIBRATION_TEXTS, model)
    lengths = mask.sum(1)
    return maxima(weights, ((ids[i:i + 1, :n], mask[i:i + 1, :n]) for i, n in enumerate(lengths)))


def load_weights(model: ModelRecord | str | None = None) -> dict[str, np.ndarray]:
    """A model's verified weights as numpy arrays under BERT's names, by its record's
    reader: float32 everywhere but an E5S1 file's compact word table."""
    spec = record(model)
    readers = {"safetensors": _safetensors_weights, "e5s1": _e5s1_weights}
    return readers[spec.weights_reader](spec)


def _safetensors_weights(spec: ModelRecord) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    folder = verified_model_dir(spec)
    config = json.loads((folder / "config.json").read_text())
    expected = {"num_hidden_layers": spec.layers, "hidden_size": HIDDEN,
                "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
                "hidden_act": "gelu", "position_embedding_type": "absolute"}
    wrong = {k: config.get(k) for k, v in expected.items() if config.get(k) != v}
    if wrong:
        raise ExportError(f"config.json does not describe {spec.name}: {wrong}")
    return load_file(str(folder / spec.weights_file))


def _e5s1_weights(spec: ModelRecord) -> dict[str, np.ndarray]:
    from .e5s1 import Config, bert_weights, read

    f = read(weights_path(spec))
    expected = Config(hidden=HIDDEN, layers=spec.layers, heads=HEADS, intermediate=INTERMEDIATE,
                      vocab_rows=f.config.vocab_rows, max_positions=MAX_POSITIONS,
                      token_types=f.config.token_types, eps=f.config.eps)
    if f.config != expected or len(f.vocabulary) > f.config.vocab_rows:
        raise ExportError(f"{f.path} does not describe {spec.name}: {f.config}")
    return bert_weights(f)


def _save(model, path: Path) -> None:
    import onnx

    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ExportError(f"the built ONNX graph is invalid: {exc}") from exc
    onnx.save(model, str(path))


# -- verification ------------------------------------------------------------------


def numpy_forward(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """model/twin.py's fp32 forward pass (imported when an export is checked, not by
    every process that loads the cached file)."""
    from .twin import numpy_forward as forward

    return forward(w, ids, mask)


def check_batch(model: ModelRecord | str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CHECK_TEXTS tokenized and padded into one batch (padding is exercised too)."""
    return padded_batch(CHECK_TEXTS, model)


def padded_batch(texts, model: ModelRecord | str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Texts with the model's passage prefix, tokenized (truncated at its max_tokens) and
    padded into one batch."""
    from .files import load_tokenizer

    spec = record(model)
    encodings = load_tokenizer(model=spec).encode_batch([spec.passage_prefix + t for t in texts])
    seq = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), seq), spec.pad_id, np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = 1
    return ids, mask


def open_checked(path: Path, threads: int | None = None, precision: str = "fp32"):
    """A session over ``path`` optimized at load (``threads``: onnxruntime's default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(DISABLED_OPTIMIZERS[precision]))


def run_session(path: Path, ids: np.ndarray, mask: np.ndarray, threads: int | None = None,
                precision: str = "fp32") -> np.ndarray:
    """One batch through a fresh session over ``path``."""
    return run_texts(open_checked(path, threads, precision), ids, mask)


def run_texts(session, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A padded batch's vectors [B, 384]: one run where the graph takes the mask (fp32),
    else each text alone at its own length (int8 has no mask: int8_graph.py)."""
    if any(i.name == "attention_mask" for i in session.get_inputs()):
        return session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    return np.concatenate([session.run(["sentence_embedding"], {"input_ids": row[None, : int(n)]})[0]
                           for row, n in zip(ids, mask.sum(1))])


Runner = Callable[..., np.ndarray]  # (path, ids, mask, threads=None) -> [B, 384]


def _session_runner(precision: str) -> Runner:
    """run_session with one session per thread count, opened once (the int8 checks run
    the file eight times; opening it is most of a run)."""
    sessions: dict = {}

    def run(path: Path, ids: np.ndarray, mask: np.ndarray, threads: int | None = None):
        if threads not in sessions:
            sessions[threads] = open_checked(path, threads, precision)
        return run_texts(sessions[threads], ids, mask)

    return run


def verify(path: Path, precision: str, weights: dict | None = None, runner: Runner | None = None,
           model: ModelRecord | str | None = None) -> dict:
    """Check an exported file on fixed texts; raise ExportError when it is wrong.

    Checks: shape, finite, unit norm, agreement with ``numpy_forward`` (fp32: max abs
    difference; int8: minimum cosine) and, for fp32, the stored sentence-transformers
    values of "hello world"; for int8 also the same bytes in reverse order and on one and
    two threads (``_int8_problems``). Returns the measured figures.
    """
    spec = record(model)
    weights = load_weights(spec) if weights is None else weights
    runner = runner or _session_runner(precision)
    ids, mask = check_batch(spec)
    try:
        got = runner(path, ids, mask)
    except Exception as exc:  # onnxruntime's errors carry no common base class
        raise ExportError(f"the exported graph {path.name} does not run: {exc}") from exc
    expected = numpy_forward(weights, ids, mask)
    problems = []
    if got.shape != expected.shape or got.dtype != np.float32:
        raise ExportError(f"exported graph returned {got.dtype}{got.shape}, expected float32{expected.shape}")
    if not np.isfinite(got).all():
        problems.append("non-finite values")
    norms = np.linalg.norm(got.astype(np.float64), axis=1)
    if np.abs(norms - 1.0).max() > 1e-4:
        problems.append(f"norms {norms.min():.6f}..{norms.max():.6f}, not 1")
    max_abs = float(np.abs(got - expected).max())
    min_cos = float((got * expected).sum(1).min())
    report = {"texts": len(CHECK_TEXTS), "max_abs_vs_numpy": max_abs, "min_cosine_vs_numpy": min_cos}
    if precision == "fp32":
        if not max_abs <= FP32_ATOL:
            problems.append(f"max abs difference {max_abs:.2e} from the numpy forward pass")
        head = float(np.abs(got[0, : len(HELLO_WORLD_HEAD)] - HELLO_WORLD_HEAD).max())
        if spec is MINILM and not head <= 2e-5:
            problems.append(f"'hello world' is {head:.2e} away from sentence-transformers")
    else:
        if not min_cos >= INT8_MIN_COSINE:
            problems.append(f"min cosine {min_cos:.4f} to the fp32 forward pass, below {INT8_MIN_COSINE}")
        problems += _int8_problems(path, runner, ids, mask, got, report)
    if problems:
        raise ExportError(f"the {precision} export failed verification: {'; '.join(problems)}")
    return {"verified": report}


def _int8_problems(path: Path, runner: Runner, ids: np.ndarray, mask: np.ndarray,
                   got: np.ndarray, report: dict) -> list[str]:
    """Whether the int8 vectors are independent of how the texts are run: in reverse
    order, on one thread and on two (each text runs alone: ``run_texts``)."""
    def reversed_batch() -> np.ndarray:
        return runner(path, ids[::-1].copy(), mask[::-1].copy())[::-1]

    runs: dict[str, Callable[[], np.ndarray]] = {"the batch reversed": reversed_batch}
    runs |= {f"{n} thread(s)": partial(runner, path, ids, mask, threads=n) for n in (1, 2)}
    moved = [how for how, run in runs.items() if not np.array_equal(run(), got)]
    report["batch_invariant"] = not moved
    return [f"vectors change with the batch ({', '.join(moved)})"] if moved else []
