"""An mteb cross-encoder as the ``predict(pairs) -> scores`` scorer of the reranker mode.

Apart from r2med_plugin.integrations.mteb, which every ``import mteb`` runs (the autoload hook): this one is
imported only when an mteb cross-encoder reranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
import mteb

from r2med_plugin.integrations.compat import mteb_dataloader
from r2med_plugin.models.protocols import PairScorerBase


class MtebPairScorer(PairScorerBase):
    """Any mteb cross-encoder (``predict(inputs1, inputs2, *, task_metadata, ...)`` on DataLoaders) as the
    ``predict(pairs) -> scores`` scorer of the reranker mode, fed as mteb feeds a reranking task.

    ``evaluate_task("R2MEDBiology", rerank=MtebPairScorer(mteb.get_model(name), "R2MEDBiology"), first_stage=...)``.
    The scores are what the model's predict returns (for a CrossEncoderWrapper: after its activation).
    """

    def __init__(self, model: Any, task: str = "R2MEDBiology", *, batch_size: int = 32) -> None:
        if not hasattr(model, "predict"):
            raise TypeError(f"{type(model).__name__} has no predict(); it is not an mteb cross-encoder")
        meta = getattr(model, "mteb_model_meta", None)
        self.model = model
        self.name = getattr(meta, "name", None) or type(model).__name__
        self.revision = getattr(meta, "revision", None) or "unknown"
        self.task_metadata = mteb.get_task(task).metadata
        self.batch_size = batch_size

    def for_task(self, task: str) -> "MtebPairScorer":
        """The same model, fed with ``task``'s metadata (its prompts); the reranker mode binds each task's own."""
        import copy

        bound = copy.copy(self)
        bound.task_metadata = mteb.get_task(task).metadata
        return bound

    def predict(self, pairs: Sequence[tuple[str, str]]) -> Any:
        import numpy as np
        from mteb.types import PromptType

        def loader(texts: tuple[str, ...], kind: PromptType) -> Any:
            rows = datasets.Dataset.from_dict({"id": [str(index) for index in range(len(texts))], "text": list(texts)})
            return mteb_dataloader(rows, task_metadata=self.task_metadata, prompt_type=kind, batch_size=self.batch_size)

        queries, documents = zip(*pairs, strict=True) if pairs else ((), ())
        scores = self.model.predict(
            loader(queries, PromptType.query), loader(documents, PromptType.document), task_metadata=self.task_metadata,
            hf_split="test", hf_subset="default", show_progress_bar=False,
        )
        return np.asarray(scores, dtype=np.float64)
