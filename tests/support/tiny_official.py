"""Tiny seeded checkpoints in the shapes of the official R2MED retrievers (one layer, a word-level vocabulary):
a BERT (contriever, bge, MedCPT towers, InstructOR's encoder), a Llama with a pad token and right padding (e5, sfr:
"last" pooling) and one without a pad token (BMRetriever: EOS as pad, left padding, "last-bmr"), an InstructOR-style
sentence-transformers folder, and an NV-Embed-style remote-code model with its own ``encode(texts, instruction=...)``.

Used by tests/models/test_official.py and benchmarks/official_dense_parity.py (which runs the official classes
on the same folders); ``chat_llama`` (a causal Llama with a chat template, for a real chat-completions server) by
tests/llm/test_real_servers.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "[CLS]", "[SEP]"]
BASE_WORDS = ["query:", "passage:", "represent", "this", "given", "a", "post", "retrieve", "relevant", "passages", "the",
              "instruct:", "<|user|>", "<|embed|>", "biology", "medical", "case", "exam", "for", "retrieval"]


def vocabulary(texts: Iterable[str], limit: int = 3000) -> list[str]:
    """The special tokens, a few instruction words, then the most frequent lower-cased words of ``texts``."""
    counts: dict[str, int] = {}
    for text in texts:
        for word in re.findall(r"\S+", text.lower()):
            counts[word] = counts.get(word, 0) + 1
    ranked = sorted(counts, key=lambda word: (-counts[word], word))
    words = list(dict.fromkeys(BASE_WORDS + ranked))[:limit]
    return SPECIAL + [word for word in words if word not in SPECIAL]


def tokenizer(vocab: list[str], template: str, *, pad: bool = True, padding_side: str = "right"):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    index = {token: position for position, token in enumerate(vocab)}
    backend = Tokenizer(models.WordLevel(index, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if template == "bert":
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", index["[CLS]"]), ("[SEP]", index["[SEP]"])])
        extra = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "<pad>", "unk_token": "<unk>"}
    else:  # decoder: <s> before the text, as Llama's and Mistral's tokenizers
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                               special_tokens=[("<s>", index["<s>"])])
        extra = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"} | ({"pad_token": "<pad>"} if pad else {})
    return PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=4096, padding_side=padding_side, **extra)


def bert(folder: Path, vocab: list[str], seed: int) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    # initializer_range 0.5: with the default 0.02 a one-layer BERT gives nearly one CLS vector for every text
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=1024, pad_token_id=0, initializer_range=0.5)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer(vocab, "bert").save_pretrained(folder)
    return folder


def llama(folder: Path, vocab: list[str], seed: int, *, pad: bool) -> Path:
    """A one-layer Llama; ``pad``: a pad token and right padding (e5/sfr), else none (BMRetriever sets EOS, left)."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    tok = tokenizer(vocab, "decoder", pad=pad)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id if pad else None)
    torch.manual_seed(seed)
    LlamaModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def instructor(folder: Path, vocab: list[str], seed: int) -> Path:
    """A sentence-transformers folder over a tiny BERT: mean pooling (the prompt can be left out of it), normalised."""
    from sentence_transformers import SentenceTransformer, models

    encoder = bert(folder.parent / f"{folder.name}-bert", vocab, seed)
    transformer = models.Transformer(str(encoder), max_seq_length=512)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling, models.Normalize()]).save(str(folder))
    return folder


NV_MODELING = '''
import torch
from transformers import AutoTokenizer, PretrainedConfig, PreTrainedModel


class TinyNVConfig(PretrainedConfig):
    model_type = "tiny_nv"

    def __init__(self, vocab_size=8, hidden_size=8, **kwargs):
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        super().__init__(**kwargs)


class TinyNVModel(PreTrainedModel):
    """NV-Embed's interface: encode(texts, instruction, max_length) embeds instruction + text and mean-pools the text
    tokens only (the instruction is masked out of the pooling), returning a tensor."""

    config_class = TinyNVConfig

    def __init__(self, config):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.mix = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.post_init()

    def encode(self, prompts, instruction="", max_length=4096, **kwargs):
        tokenizer = AutoTokenizer.from_pretrained(self.config._name_or_path, trust_remote_code=True)
        skip = len(tokenizer(instruction, add_special_tokens=False)["input_ids"]) if instruction else 0
        batch = tokenizer([instruction + text for text in prompts], padding=True, truncation=True,
                          max_length=max_length, return_tensors="pt")
        mask = batch["attention_mask"].clone()
        mask[:, :skip] = 0
        hidden = torch.tanh(self.mix(self.embed(batch["input_ids"])))
        return (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
'''


def nv_embed(folder: Path, vocab: list[str], seed: int) -> Path:
    """A remote-code model folder (auto_map) whose ``encode`` takes an instruction, as NV-Embed-v2's."""
    import importlib.util
    import sys

    import torch

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modeling_tiny_nv.py").write_text(NV_MODELING, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"tiny_nv_{seed}", folder / "modeling_tiny_nv.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    model = module.TinyNVModel(module.TinyNVConfig(vocab_size=len(vocab), hidden_size=16))
    model.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["auto_map"] = {"AutoConfig": "modeling_tiny_nv.TinyNVConfig", "AutoModel": "modeling_tiny_nv.TinyNVModel"}
    config["model_type"] = "tiny_nv"
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tok = tokenizer(vocab, "bert")
    tok.save_pretrained(folder)
    return folder


def build_all(root: Path, texts: Iterable[str]) -> dict[str, Path]:
    """Every shape, under ``root``: {shape: folder}."""
    vocab = vocabulary(texts)
    root.mkdir(parents=True, exist_ok=True)
    return {
        "bert": bert(root / "bert", vocab, 1),
        "medcpt-query": bert(root / "medcpt-query", vocab, 2),
        "medcpt-article": bert(root / "medcpt-article", vocab, 3),
        "llama-pad": llama(root / "llama-pad", vocab, 4, pad=True),
        "llama-bmr": llama(root / "llama-bmr", vocab, 5, pad=False),
        "instructor": instructor(root / "instructor", vocab, 6),
        "nv": nv_embed(root / "nv", vocab, 7),
    }


CHAT_TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def chat_llama(folder: Path, texts: Iterable[str], seed: int) -> Path:
    """A one-layer LlamaForCausalLM with a chat template, for chat-completion servers (``transformers serve``).

    Its words are those of ``texts`` without any that hold a digit, and its generation config suppresses the special
    tokens: it never ends early (every answer runs to ``max_tokens``, finish_reason "length") and never says a number,
    so no answer of it is a relevance label or a passage identifier, whatever the seed: what a reranker makes of its
    answers is fixed by construction, not by the random weights."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    words = [word for word in vocabulary(texts, limit=400) if not any(ch.isdigit() for ch in word)]
    vocab = list(dict.fromkeys(words + ["<|system|>", "<|user|>", "<|assistant|>"]))
    tok = tokenizer(vocab, "decoder", pad=True)
    tok.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id,
                                               suppress_tokens=[vocab.index(token) for token in SPECIAL])
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
