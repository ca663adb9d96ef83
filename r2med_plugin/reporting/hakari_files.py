"""The files that carry results to HAKARI-Bench: the HAKARI record beside a NanoR2MED result
(``<Task>.hakari.json.xz``, computed by r2med_plugin.evaluation.hakari_record) and HAKARI's own ``.json.xz``
results (r2med_plugin.reporting.venues): lzma-compressed JSON objects, as HAKARI's ``read_result_json`` reads them.

Not ``.json``: mteb's ResultCache reads every ``<model>/<revision>/*.json`` as a task result.
"""

from __future__ import annotations

import json
import lzma
from collections.abc import Mapping
from pathlib import Path

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import HAKARI_BM25, is_hakari_bm25
from r2med_plugin.io import atomic_write

HAKARI_RECORD_FORMAT = "r2med-hakari/1"
HAKARI_DATASET_NAME = "NanoR2MED"


def keeps_own_order(retriever: str) -> bool:
    """A bm25-hakari run's order is bm25s's (its own tie order): a HAKARI ranking keeps it."""
    return is_hakari_bm25(retriever)


def hakari_record_path(mteb_path: Path) -> Path:
    """``<Task>.hakari.json.xz`` beside ``<Task>.json``."""
    return mteb_path.with_name(mteb_path.name.removesuffix(".json") + ".hakari.json.xz")


def write_hakari_record(record: dict, mteb_path: Path) -> Path:
    return write_xz_json(hakari_record_path(mteb_path), record)


def write_xz_json(path: Path, payload: Mapping) -> Path:
    """An lzma-compressed JSON object (HAKARI's ``.json.xz``), written atomically."""

    def write(temporary: Path) -> None:
        with lzma.open(temporary, "wt", encoding="utf-8") as handle:
            json.dump(payload, handle, ensure_ascii=False)

    return atomic_write(path, write)


def read_xz_json(path: Path) -> dict:
    """A ``.json.xz`` file's JSON object, as HAKARI's ``read_result_json`` reads it (an object, else an error)."""
    try:
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            payload = json.load(handle)
    except (OSError, lzma.LZMAError, ValueError) as error:
        raise UserError(f"{path}: not an lzma-compressed JSON file ({error}); write it again") from error
    if not isinstance(payload, dict):
        raise UserError(f"{path}: holds {type(payload).__name__}, not a JSON object; write it again")
    return payload


__all__ = ["HAKARI_BM25", "HAKARI_DATASET_NAME", "HAKARI_RECORD_FORMAT", "hakari_record_path", "keeps_own_order",
           "read_xz_json", "write_hakari_record", "write_xz_json"]
