"""RankLLaMA parity: the official ``RerankerModel`` (src/utils.py of R2MED/R2MED@62b7074, imported unchanged) in
llama mode against ``official:rankllama`` on a tiny random Llama with a seeded LoRA adapter.

    python benchmarks/official_reranker_parity.py --official-src /path/to/R2MED/src

utils.py imports gritlm, tiktoken and voyageai at its top (for other models); where they are not installed, empty
stand-in modules are put in sys.modules so the import succeeds (RerankerModel uses none of them). The official code
loads RankLLaMA in float16 (hard-coded): it is compared with ours at float16 (the same recipe, so the scores should
agree exactly) and, for information, with ours at float32.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

WORDS = [f"w{i}" for i in range(40)] + ["query:", "document:", "the", "cell", "gene", "protein", "binds"]
PAIRS = [
    ("the gene binds", "the protein binds the cell"),
    ("cell", "w1 w2 w3 gene"),
    ("w5 w6 protein", "w7"),
    ("protein binds", "w9 w10 the gene w11 cell"),
    ("gene", " ".join(f"w{i % 40}" for i in range(700))),  # over 512 tokens: truncated
]


def tiny_rankllama(root: Path) -> tuple[Path, Path]:
    """(adapter, base): a seeded one-layer Llama saved as a causal LM with a WordLevel tokenizer (<s> before each
    text, as Llama-2's), and a seeded SEQ_CLS LoRA on it (non-zero B, its own score head)."""
    import peft
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification, PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(["<pad>", "<unk>", "<s>", "</s>"] + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                           special_tokens=[("<s>", vocab["<s>"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=4096, bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>")
    base, adapter = root / "base", root / "adapter"
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], pad_token_id=None)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    torch.manual_seed(1)
    classifier = LlamaForSequenceClassification.from_pretrained(base, num_labels=1)
    torch.manual_seed(2)
    lora = peft.LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft.get_peft_model(classifier, lora).save_pretrained(adapter)
    return adapter, base


def import_official_utils(src: Path):
    """src/utils.py, unchanged, with stand-ins only for the top-level imports that are not installed."""
    for missing, attributes in {"gritlm": ["GritLM"], "tiktoken": [], "voyageai": []}.items():
        try:
            importlib.import_module(missing)
        except ImportError:
            stand_in = types.ModuleType(missing)
            for attribute in attributes:
                setattr(stand_in, attribute, type(attribute, (), {}))
            sys.modules[missing] = stand_in
            print(f"stand-in module: {missing}")
    sys.path.insert(0, str(src))
    return importlib.import_module("utils")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official-src", type=Path, required=True, help="the official repository's src folder")
    args = parser.parse_args()
    utils_py = args.official_src / "utils.py"
    print(f"official src/utils.py sha256 {hashlib.sha256(utils_py.read_bytes()).hexdigest()[:16]}")
    from r2med_plugin.models.registry import load_reranker

    with tempfile.TemporaryDirectory() as folder:
        adapter, base = tiny_rankllama(Path(folder))
        official = import_official_utils(args.official_src).RerankerModel(
            model_name_or_path=[str(adapter), str(base)], max_length=512, mode="llama")
        theirs = np.asarray(official.predict([list(pair) for pair in PAIRS]), dtype=np.float64)
        name = f"official:rankllama@{adapter}+{base}"
        ours16 = load_reranker(name).predict(PAIRS)  # default: float16, as the official code
        ours32 = load_reranker(name, dtype="float32").predict(PAIRS)
    print(f"pairs: {len(PAIRS)} (one over 512 tokens)")
    print(f"official llama mode (float16): {np.round(theirs, 6).tolist()}")
    print(f"ours, float16:                 {np.round(ours16, 6).tolist()}")
    print(f"max |ours float16 - official| = {np.abs(ours16 - theirs).max():.3g}")
    print(f"max |ours float32 - official float16| = {np.abs(ours32 - theirs).max():.3g} (dtype rounding only)")
    return 0 if np.abs(ours16 - theirs).max() <= 1e-5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
