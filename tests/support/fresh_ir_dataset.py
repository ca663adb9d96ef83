"""An ir_datasets dataset built afresh from the integration, as a new process would see it."""

from __future__ import annotations


def fresh_dataset(dataset_id: str):
    """What a new process sees: a freshly built dataset (registered ones keep what they loaded)."""
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.util.metadata import MetadataComponent, MetadataProvider

    from r2med_plugin.integrations import ir_datasets as integration

    datasets, metadata = integration.build_datasets()
    return Dataset(MetadataComponent(dataset_id, datasets[dataset_id], MetadataProvider(lambda: metadata)), datasets[dataset_id])
