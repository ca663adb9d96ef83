"""Renamed :mod:`r2med_plugin.identifiers` (beside r2med_plugin.evaluation.naming, which names an evaluation's
result through it); the old path still works, with a warning."""

from r2med_plugin._moved import Moved, same_names

__all__ = [
    "BM25_NAMES", "BM25_VARIANTS", "CANDIDATE_SUBSETS", "COUNT_DRIFT", "EXPANSION_METHODS", "GENERATION_METHODS",
    "LOCAL_REVISION_PREFIX", "SYNTHETIC_REVISION", "UNVERIFIED_MARKER", "Bm25Variant", "DatasetRevision", "Expansion",
    "OfficialLayoutName", "ResultName", "TieOrder",
]
__getattr__ = Moved(__name__, same_names("r2med_plugin.identifiers", __all__))
