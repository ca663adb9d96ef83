"""Which training datasets are R2MED's sources: a small mapping kept as data (sources.json, each entry with its
citation and URL), matched against dataset names such as mteb's ModelMeta.training_datasets."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def source_entries() -> tuple[dict, ...]:
    text = (resources.files("r2med_plugin") / "audit" / "sources.json").read_text(encoding="utf-8")
    return tuple(json.loads(text)["entries"])


def match_sources(names: Iterable[str]) -> list[dict]:
    """For each name that is one of R2MED's sources, the first matching entry with the name: source, relation,
    tasks, note, citation, url. Names that match nothing are left out."""
    found = []
    for name in sorted(set(names)):
        entry, match = next(((e, m) for e in source_entries() if (m := re.search(e["pattern"], name))), (None, None))
        if entry is not None and match is not None:
            tasks = entry["tasks"]
            if tasks == "domain":  # the pattern's first group is the domain
                tasks = [f"R2MED{match.group(1)}", f"NanoR2MED{match.group(1)}"]
            found.append({"dataset": name, **{k: v for k, v in entry.items() if k != "pattern"}, "tasks": list(tasks)})
    return found


def declared_report(model: str, datasets: Iterable[str] | None, known: bool) -> dict:
    """The declared-training-data block of an audit: what mteb lists for ``model`` and which are R2MED's sources."""
    if not known:
        return {"model": model, "known_to_mteb": False, "training_datasets": None, "r2med_sources": []}
    names = sorted(datasets) if datasets is not None else None
    return {"model": model, "known_to_mteb": True, "training_datasets": names,
            "r2med_sources": match_sources(names or [])}
