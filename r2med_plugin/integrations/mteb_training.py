"""mteb's declared training data of a model (``ModelMeta.training_datasets``) for `r2med audit --model`, with which
of those datasets are R2MED's sources (r2med_plugin/audit/sources.json). mteb is imported only here."""

from __future__ import annotations

from r2med_plugin.audit.sources import declared_report
from r2med_plugin.integrations.mteb_models import model_meta


def declared_training_data(model: str) -> dict:
    """The declared-training-data block for ``model``: mteb's ``get_training_datasets()`` (the datasets it uses for
    its zero-shot mark: the model's own, those of the model it was adapted from, and their similar tasks), the
    model's own list apart, and the R2MED sources among them. Never reaches the hub."""
    meta = model_meta(model)
    if meta is None:
        return declared_report(model, None, known=False)
    own = sorted(meta.training_datasets) if meta.training_datasets is not None else None
    return {**declared_report(meta.name, meta.get_training_datasets(), known=True), "declared_by_model": own}
