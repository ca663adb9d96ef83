"""The torch recipes of the official R2MED dense retrievers (``--retriever official:<name>``): one per official class.

Each profile is what src/eval_retrieval.py of R2MED/R2MED@62b7074 configures for one of its retriever names
(contriever, medcpt, inst-l, inst-xl, bmr-410m, bmr-2b, bmr-7b, bge, e5, grit, sfr, nv, openai, voyage): the
checkpoint, the src/utils.py model class with its arguments, and the query and document instructions per task.
They are data (r2med_plugin.models.official.profiles). The recipes here follow each class's input format:

================  ===================================================================================
class             what the official class does (and so what the encoder here does)
================  ===================================================================================
FlagDRESModel,    AutoModel; "Base": pad, truncate at max_length, pool (cls / mean / last), normalise if
HighScaleModel    asked; "BMR": tokenise to max_length - 1 unpadded, append EOS, pad (left, with EOS as
                  pad when the tokenizer has none), "last-bmr" pooling, never normalised (CUDA autocast).
                  Instructions are prefixes: instruction + text.
BiEncoderModel    MedCPT: queries through the query tower as single texts, documents through the article
                  tower as ("", text) pairs (truncation longest_first); CLS vector, not normalised.
InstructorModel   sentence-transformers with the instruction as ``prompt``, excluded from pooling;
                  normalised.
GritModel         the ``gritlm`` package's GritLM in embedding mode, the instruction passed to its encode
                  (queries at most 512 tokens, documents 2048).
NVEmbedModel      the checkpoint's own ``encode(texts, instruction=..., max_length=4096)`` (remote code, float16),
                  then normalised.
RetrievalOPENAI   an embeddings endpoint (text-embedding-3-large; voyage-3 with input_type query/document): texts
                  cut to 6000 cl100k tokens (voyage: 16000 of its tokenizer), newlines made spaces, then
                  JSON-quoted (``json.dumps``) as the official code sends them.
================  ===================================================================================

With an expansion (hyde, lamer, ...), the official classes average the query's embedding with the
expansion's, both as they come out of ``encode`` (normalised or not), before the cosine search: the
expansion gets no instruction, except for InstructorModel, GritModel and NVEmbedModel, which give it the query
instruction too. ``encode_expansions`` is that rule; the Dense stage averages the two before normalising, in the
dtype the class returns (``expansion_mean_dtype``: float16 for NV-Embed, whose official class averages float16
vectors).

Where the official code deviates from a model's own usage, the profile keeps the official behaviour (it is
what the published numbers measure): ``official:medcpt`` encodes queries with the article encoder (eval_retrieval
passes ``retrieral_model_path[1]`` for both towers; ``official:medcpt@ncbi/MedCPT-Query-Encoder+ncbi/MedCPT-Article-Encoder``
uses both towers), e5/sfr get no EOS token, and InstructOR keeps its checkpoint's maximum length.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.models.placement import DevicePool, dtype_option
from r2med_plugin.models.protocols import EncodeKind
from r2med_plugin.quiet import bar_disabled, bar_shown

OPENAI_CUT, VOYAGE_CUT = 6000, 16000  # RetrievalOPENAI.encode: cut_text_openai (cl100k) and cut_text (voyage's tokenizer)


def _torch_dtype(dtype: str | None, default: Any) -> Any:
    import torch

    if dtype is None:
        return default
    chosen = getattr(torch, dtype, None)
    if not isinstance(chosen, torch.dtype):
        raise UserError(f"dtype must name a torch dtype (float16, bfloat16, float32), got {dtype!r}")
    return chosen



def _prefixed(instruction: str | None, texts: list[str]) -> list[str]:
    """'{}{}'.format(instruction, text), as the official classes build their inputs (None: the texts as they are)."""
    return texts if instruction is None else [f"{instruction}{text}" for text in texts]


def _batches(texts: list[str], size: int, show_progress: bool, what: str):
    from tqdm.auto import tqdm

    starts = range(0, len(texts), size)
    for start in tqdm(starts, desc=what, unit="batch", disable=bar_disabled(show_progress and len(texts) > size)):
        yield texts[start:start + size]


class Recipe:
    """What every recipe has: ``encode(texts, kind, instruction, expansion=False)``, the ``settings()`` that name its
    embeddings in the cache key, and the dtype its embeddings come in (``output_dtype``: the official class averages a
    query's and its expansion's embeddings in it)."""

    output_dtype = "float32"

    def settings(self) -> list[Any]:
        raise NotImplementedError

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        raise NotImplementedError


class TransformerRecipe(Recipe):
    """FlagDRESModel / HighScaleModel: AutoModel with the official pooling, in "Base" or "BMR" encode mode."""

    def __init__(self, checkpoint: str, *, pooling_method: str, normalize_embeddings: bool, max_length: int,
                 encode_mode: str, batch_size: int, device: str, dtype: str | None, show_progress: bool,
                 revision: str | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        if pooling_method not in ("cls", "mean", "last", "last-bmr") or encode_mode not in ("Base", "BMR"):
            raise ValueError(f"unknown pooling {pooling_method!r} or encode mode {encode_mode!r}")
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint, revision=revision)
        self.model = AutoModel.from_pretrained(checkpoint, revision=revision,
                                               **dtype_option(_torch_dtype(dtype, torch.float32))).to(device).eval()
        if encode_mode == "BMR" and self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
            self.tokenizer.padding_side = "left"
        self.pooling_method, self.normalize = pooling_method, normalize_embeddings
        self.max_length, self.encode_mode, self.batch_size = max_length, encode_mode, batch_size
        self.device, self.dtype, self.show_progress = device, dtype, show_progress

    def settings(self) -> list[Any]:
        autocast = self.encode_mode == "BMR" and torch_device_type(self.device) == "cuda"  # float16 matmuls on CUDA
        return [self.pooling_method, self.normalize, self.max_length, self.encode_mode, self.dtype,
                self.tokenizer.padding_side, self.tokenizer.pad_token, autocast]

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        import torch

        inputs = _prefixed(instruction, texts)
        chunks = []
        with torch.no_grad():
            for batch in _batches(inputs, self.batch_size, self.show_progress, f"Encoding {kind}s"):
                chunks.append(self._encode_batch(batch))
        return np.concatenate(chunks, axis=0) if chunks else np.zeros((0, self.model.config.hidden_size), np.float32)

    def _encode_batch(self, batch: list[str]) -> np.ndarray:
        import torch

        if self.encode_mode == "Base":
            tokens = self.tokenizer(batch, padding=True, truncation=True, return_tensors="pt",
                                    max_length=self.max_length).to(self.device)
            hidden = self.model(**tokens, return_dict=True).last_hidden_state
            embeddings = pool(hidden, tokens["attention_mask"], self.pooling_method)
            if self.normalize:
                embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
            return embeddings.float().cpu().numpy()
        from transformers.utils import PaddingStrategy

        tokens = self.tokenizer(batch, max_length=self.max_length - 1, return_attention_mask=False,
                                return_token_type_ids=False, padding=PaddingStrategy.DO_NOT_PAD, truncation=True)
        tokens["input_ids"] = [ids + [self.tokenizer.eos_token_id] for ids in tokens["input_ids"]]
        padded = self.tokenizer.pad(tokens, padding=True, return_attention_mask=True, return_tensors="pt").to(self.device)
        with torch.autocast("cuda", enabled=torch.device(self.device).type == "cuda"):  # the official torch.cuda.amp.autocast()
            hidden = self.model(**padded).last_hidden_state
            return pool(hidden, padded["attention_mask"], self.pooling_method).float().cpu().numpy()


def torch_device_type(device: str) -> str:
    import torch

    return torch.device(device).type


def pool(hidden: Any, mask: Any, method: str) -> Any:
    """The official pooling methods (FlagDRESModel.pooling)."""
    import torch

    if method == "cls":
        return hidden[:, 0]
    if method == "mean":
        return torch.sum(hidden * mask.unsqueeze(-1).float(), dim=1) / mask.sum(dim=1, keepdim=True).float()
    if method == "last-bmr":
        hidden = hidden.masked_fill(~mask[..., None].bool(), 0.0)
    left_padded = mask[:, -1].sum() == mask.shape[0]
    if left_padded:
        return hidden[:, -1]
    lengths = mask.sum(dim=1) - 1
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), lengths]


class BiEncoderRecipe(Recipe):
    """MedCPT (BiEncoderModel): a query tower and an article tower, CLS vectors."""

    def __init__(self, query_checkpoint: str, document_checkpoint: str, *, max_length: int, batch_size: int, device: str,
                 dtype: str | None, show_progress: bool, revision: str | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        option = dtype_option(_torch_dtype(dtype, torch.float32))
        self.query_tokenizer = AutoTokenizer.from_pretrained(query_checkpoint, revision=revision)
        self.query_model = AutoModel.from_pretrained(query_checkpoint, revision=revision, **option).to(device).eval()
        self.document_tokenizer = AutoTokenizer.from_pretrained(document_checkpoint, revision=revision)
        self.document_model = AutoModel.from_pretrained(document_checkpoint, revision=revision, **option).to(device).eval()
        self.max_length, self.batch_size, self.device = max_length, batch_size, device
        self.dtype, self.show_progress = dtype, show_progress

    def settings(self) -> list[Any]:
        return [self.max_length, self.dtype]

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        import torch

        inputs = _prefixed(instruction, texts) if kind == "query" else texts  # the official class gives documents none
        chunks = []
        with torch.no_grad():
            for batch in _batches(inputs, self.batch_size, self.show_progress, f"Encoding {kind}s"):
                if kind == "query":
                    tokens = self.query_tokenizer(batch, padding=True, truncation=True, return_tensors="pt",
                                                  max_length=self.max_length).to(self.device)
                    hidden = self.query_model(**tokens).last_hidden_state
                else:
                    tokens = self.document_tokenizer([""] * len(batch), batch, padding=True, truncation="longest_first",
                                                     return_tensors="pt", max_length=self.max_length).to(self.device)
                    hidden = self.document_model(**tokens).last_hidden_state
                chunks.append(hidden[:, 0, :].float().cpu().numpy())
        return np.concatenate(chunks, axis=0)


class InstructorRecipe(DevicePool, Recipe):
    """InstructorModel: sentence-transformers, the instruction as a prompt left out of the pooling, normalised."""

    def __init__(self, checkpoint: str, *, batch_size: int, device: str, show_progress: bool, revision: str | None = None,
                 devices: list[str] | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        # devices: sentence-transformers' multi-process pool, one process per device (it copies the model onto each)
        self.model = SentenceTransformer(checkpoint, revision=revision, device="cpu" if devices else device)
        self.model.set_pooling_include_prompt(False)
        self.batch_size, self.show_progress, self.devices = batch_size, show_progress, devices
        self._pool = None

    def settings(self) -> list[Any]:
        from r2med_plugin.models.identity import encoder_settings

        return [encoder_settings(self.model)]

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        return np.asarray(self.model.encode(texts, batch_size=self.batch_size, show_progress_bar=bar_shown(self.show_progress),
                                            prompt=instruction, normalize_embeddings=True, convert_to_numpy=True,
                                            **self._pool_option()))


class GritRecipe(Recipe):
    """GritModel: the ``gritlm`` package's GritLM in embedding mode (queries 512 tokens at most, documents 2048)."""

    def __init__(self, checkpoint: str, *, batch_size: int, query_max_length: int, doc_max_length: int, device: str,
                 show_progress: bool, revision: str | None = None) -> None:
        try:
            from gritlm import GritLM
        except ImportError as error:
            raise ImportError("official:grit encodes through GritLM's own package, as the official code: "
                              "pip install 'r2med-plugin[grit]' (or pip install gritlm)") from error
        # the official code passes device_map="auto"; here the one device asked for (GritLM would otherwise take every GPU)
        options: dict[str, Any] = {"torch_dtype": "auto", "mode": "embedding", "device_map": {"": device}}
        if revision is not None:
            options["revision"] = revision
        self.model = GritLM(checkpoint, **options)
        import torch

        self.model.device = torch.device(device)  # where GritLM.encode puts its inputs
        self.batch_size, self.show_progress = batch_size, show_progress
        self.max_length = {"query": query_max_length, "document": doc_max_length}

    def settings(self) -> list[Any]:
        return [self.max_length]

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        chunks = [np.asarray(self.model.encode(batch, instruction=instruction, batch_size=self.batch_size,
                                               max_length=self.max_length[kind]))
                  for batch in _batches(texts, self.batch_size, self.show_progress, f"Encoding {kind}s")]
        return np.concatenate(chunks, axis=0)


class NVEmbedRecipe(Recipe):
    """NVEmbedModel: the checkpoint's own ``encode`` (trust_remote_code, float16), then normalised."""

    def __init__(self, checkpoint: str, *, batch_size: int, max_length: int, normalize_embeddings: bool, device: str,
                 dtype: str | None, show_progress: bool, revision: str | None = None) -> None:
        import torch
        from transformers import AutoModel

        self.model = AutoModel.from_pretrained(checkpoint, revision=revision, trust_remote_code=True,
                                               **dtype_option(_torch_dtype(dtype, torch.float16))).to(device).eval()
        self.batch_size, self.max_length, self.normalize = batch_size, max_length, normalize_embeddings
        self.dtype, self.show_progress = dtype or "float16", show_progress
        self.output_dtype = "float16" if self.dtype == "float16" else "float32"  # NVEmbedModel returns the model's dtype

    def settings(self) -> list[Any]:
        return [self.max_length, self.normalize, self.dtype]

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        import torch

        chunks = []
        with torch.no_grad():
            for batch in _batches(texts, self.batch_size, self.show_progress, f"Encoding {kind}s"):
                embeddings = self.model.encode(batch, instruction=instruction, max_length=self.max_length)
                if self.normalize:
                    embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
                chunks.append(embeddings.float().cpu().numpy())
        return np.concatenate(chunks, axis=0)


class EndpointRecipe(Recipe):
    """RetrievalOPENAI: the official text preparation in front of an embeddings endpoint (an EndpointEncoder)."""

    def __init__(self, model: str, endpoint: Any, *, voyage: bool) -> None:
        self.model, self.endpoint, self.voyage = model, endpoint, voyage
        self._cutter: Any = None

    def settings(self) -> list[Any]:
        return [self.model, self.endpoint.cache_identity, self.voyage]

    def prepared(self, text: str) -> str:
        """cut_text_openai / cut_text, then json.dumps(text.replace("\\n", " ")) (RetrievalOPENAI.encode)."""
        limit = VOYAGE_CUT if self.voyage else OPENAI_CUT
        # A token is at least one UTF-8 byte, so a text of at most `limit` bytes (less the special tokens) is never cut.
        if len(text.encode("utf-8")) + 8 > limit:
            text = self._cut(text, limit)
        return json.dumps(text.replace("\n", " "))

    def _cut(self, text: str, limit: int) -> str:
        if self.voyage:
            if self._cutter is None:
                from transformers import AutoTokenizer

                self._cutter = AutoTokenizer.from_pretrained(f"voyageai/{self.model}")
            ids = self._cutter(text)["input_ids"]
            return self._cutter.decode(ids[:limit]) if len(ids) > limit else text
        if self._cutter is None:
            try:
                import tiktoken
            except ImportError as error:
                raise ImportError("official:openai cuts texts over 6000 tokens with tiktoken's cl100k_base, as the official "
                                  "code: pip install tiktoken") from error
            self._cutter = tiktoken.get_encoding("cl100k_base")
        ids = self._cutter.encode(text)
        return self._cutter.decode(ids[:limit]) if len(ids) > limit else text

    def encode(self, texts: list[str], kind: EncodeKind, instruction: str | None, expansion: bool = False) -> np.ndarray:
        prepared = [self.prepared(text) for text in _prefixed(instruction, texts)]
        if self.voyage:
            return self.endpoint.encode(prepared, kind=kind, extra_body={"input_type": "query" if kind == "query" else "document"})
        return self.endpoint.encode(prepared, kind=kind)
