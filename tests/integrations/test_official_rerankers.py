"""``official:`` rerankers: the official RerankerModel's recipe (src/utils.py of R2MED/R2MED@62b7074),
checked against a hand implementation of that recipe on tiny random checkpoints: a one-layer Llama with a seeded
LoRA adapter (RankLLaMA's shape) and a one-layer BERT with a one- or two-label head (bge-reranker, monoBERT).

The hand implementations below are written from the recipe, in float32 (the official code runs RankLLaMA in float16
on a GPU; ``dtype`` keeps that choice configurable, float32 makes a 1e-5 comparison meaningful)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import peft
import pytest
import torch

pytestmark = pytest.mark.slow  # transformers and peft checkpoints

WORDS = [f"w{i}" for i in range(40)] + ["query:", "document:", "the", "cell", "gene", "protein", "binds"]
PAIRS = [
    ("the gene binds", "the protein binds the cell"),
    ("cell", "w1 w2 w3 gene"),
    ("w5 w6 protein", "w7"),
    ("gene", " ".join(f"w{i % 40}" for i in range(700))),  # over 512 tokens: truncation must match
]


def _tokenizer(template: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<unk>", "<s>", "</s>", "[CLS]", "[SEP]"]
    vocab = {token: index for index, token in enumerate(special + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if template == "llama":  # as Llama-2's: <s> before each text, no </s>
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", vocab["<s>"])])
        extra = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    else:
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
        extra = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "<pad>", "unk_token": "<unk>"}
    return PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=4096, **extra)


@pytest.fixture(scope="module")
def tiny_rankllama(tmp_path_factory) -> tuple[Path, Path]:
    """(adapter folder, base folder): a seeded one-layer Llama (saved as a causal LM, as Llama-2-7b-hf is) and a
    seeded LoRA for sequence classification on it, with non-zero B matrices and its own score head."""
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

    root = tmp_path_factory.mktemp("rankllama")
    base, adapter = root / "base", root / "adapter"
    tokenizer = _tokenizer("llama")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=None)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    torch.manual_seed(1)
    classifier = LlamaForSequenceClassification.from_pretrained(base, num_labels=1)
    lora = peft.LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(2)
    model = peft.get_peft_model(classifier, lora)
    model.save_pretrained(adapter)
    b_norm = sum(float(p.detach().abs().sum()) for n, p in model.named_parameters() if "lora_B" in n)
    assert b_norm > 0  # the adapter changes the scores
    return adapter, base


def _official_llama_scores(adapter: Path, base: Path, pairs) -> list[float]:
    """RerankerModel(mode="llama"), written from the recipe: the base's tokenizer, a 1-label classifier of the base,
    the adapter merged; per pair tokenizer(f"query: {q}", f"document: {d}", max_length=512) (no truncation=), logits[0][0]."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(model, adapter).merge_and_unload().eval()
    scores = []
    with torch.no_grad():
        for query, document in pairs:
            inputs = tokenizer(f"query: {query}", f"document: {document}", return_tensors="pt", max_length=512)
            scores.append(model(**inputs).logits[0][0].float().item())
    return scores


def test_rankllama_scores_equal_the_official_recipe(tiny_rankllama):
    from r2med_plugin.models.registry import load_reranker

    adapter, base = tiny_rankllama
    expected = _official_llama_scores(adapter, base, PAIRS)
    ours = load_reranker(f"official:rankllama@{adapter}+{base}", dtype="float32")
    got = ours.predict(PAIRS)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    long_pair = ours.tokenizer(f"query: {PAIRS[-1][0]}", f"document: {PAIRS[-1][1]}", max_length=512)["input_ids"]
    assert len(long_pair) == 512  # the official call (max_length, no truncation=) truncates: so does ours
    assert len(set(np.round(got, 6))) == len(PAIRS)  # distinct scores: the comparison is not vacuous
    # the base is read from the adapter's config when not named
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]) == base
    np.testing.assert_allclose(load_reranker(f"official:rankllama@{adapter}", dtype="float32").predict(PAIRS), expected,
                               rtol=0, atol=1e-5)
    assert ours.name.endswith(f"{adapter.name}+official-rankllama") and "+" in ours.revision  # the adapter, then the base


def test_rankllama_default_dtype_is_the_official_float16(tiny_rankllama):
    from r2med_plugin.models.registry import load_reranker

    adapter, base = tiny_rankllama
    ours = load_reranker(f"official:rankllama@{adapter}+{base}")
    assert next(ours.model.parameters()).dtype == torch.float16
    got = ours.predict(PAIRS[:2])
    np.testing.assert_allclose(got, _official_llama_scores(adapter, base, PAIRS[:2]), atol=5e-2)


@pytest.mark.parametrize("mode,labels", [("bge", 1), ("mono", 2)])
def test_bge_and_mono_modes_equal_the_official_recipe(tmp_path, mode, labels):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForSequenceClassification

    from r2med_plugin.models.registry import load_reranker

    tokenizer = _tokenizer("bert")
    torch.manual_seed(3)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                        num_attention_heads=2, max_position_embeddings=600, num_labels=labels, pad_token_id=0)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    # the recipe: bge tokenizes the pairs, mono (queries, passages); both pad, truncate to 512
    reference_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "m")
    reference = AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        if mode == "bge":
            inputs = reference_tokenizer([list(p) for p in PAIRS], padding=True, truncation=True, return_tensors="pt", max_length=512)
            expected = reference(**inputs, return_dict=True).logits.view(-1).float().tolist()
        else:
            queries, passages = zip(*PAIRS, strict=True)
            inputs = reference_tokenizer(list(queries), list(passages), return_tensors="pt", truncation=True,
                                         padding="longest", max_length=512)
            expected = reference(**inputs).logits[:, 1].tolist()
    name = {"bge": "bge-reranker", "mono": "monobert"}[mode]
    got = load_reranker(f"official:{name}@{tmp_path / 'm'}").predict(PAIRS)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_names_resolve_to_the_published_checkpoints_and_short_names():
    from r2med_plugin.models.official.naming import official_reranker_name
    from r2med_plugin.models.registry import resolve

    for short, checkpoint in [("rankllama", "castorini/rankllama-v1-7b-lora-passage"), ("bge-reranker", "BAAI/bge-reranker-v2-m3"),
                              ("monobert", "castorini/monobert-large-msmarco")]:
        ref = resolve(f"official:{short}")
        assert (ref.loader, ref.source) == ("official", checkpoint)
        assert official_reranker_name(ref.source) == short  # the official JSON's model_name
    assert dict(resolve("official:rankllama").settings)["base"] == "meta-llama/Llama-2-7b-hf"
    other = resolve("castorini/rankllama-v1-7b-lora-doc")  # any RankLLaMA LoRA: the official recipe, not sentence-transformers
    assert (other.loader, dict(other.settings)["mode"]) == ("official", "llama")
    assert resolve("castorini/monot5-base-msmarco", loader="sentence-transformers").loader == "sentence-transformers"
    for bad in ["official:nope", "official:rankllama@", "official:rankllama@a+"]:
        with pytest.raises(ValueError, match="official"):
            resolve(bad)
    with pytest.raises(ValueError, match="is a reranker"):
        resolve("official:monobert").load_encoder()


def test_missing_peft_names_the_extra(monkeypatch, tiny_rankllama):
    import sys

    from r2med_plugin.models.registry import load_reranker

    monkeypatch.setitem(sys.modules, "peft", None)
    adapter, base = tiny_rankllama
    with pytest.raises(ImportError, match=r"r2med-plugin\[rankllama\]"):
        load_reranker(f"official:rankllama@{adapter}+{base}", dtype="float32")


def test_cli_reranks_with_the_tiny_rankllama(mirror_env, tiny_rankllama, tmp_path, capsys):
    from r2med_plugin.cli import main

    adapter, base = tiny_rankllama
    code = main(["evaluate", "--task", "R2MEDBiology", "--rerank", f"official:rankllama@{adapter}+{base}",
                 "--first-stage", "bm25-robertson", "--rerank-depth", "10", "--output", str(tmp_path / "out"), "--quiet"])
    assert code == 0, capsys.readouterr().err
    (written,) = (tmp_path / "out" / "official" / "reranker").rglob("*.json")
    assert json.loads(written.read_text())["topk"] == 10
