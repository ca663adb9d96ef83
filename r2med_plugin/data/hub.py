"""Where a task's dataset repo lives: a local mirror (R2MED_DATA_DIR) or a hub snapshot."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from r2med_plugin.data.layout import README, config_files, read_front_matter
from r2med_plugin.types import TaskSpec

DATA_DIR_ENV = "R2MED_DATA_DIR"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class LocatedRepo:
    root: Path
    revision: str
    source: str  # "mirror" or "hub"


def data_dir_from_env(data_dir: str | os.PathLike | None) -> Path | None:
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    return Path(chosen).expanduser() if chosen is not None else None


def locate_repo(
    spec: TaskSpec,
    data_dir: str | os.PathLike | None = None,
    *,
    accept_drift: bool = False,
    extra_configs: Sequence[tuple[str, str]] = (),
) -> LocatedRepo:
    """The folder of ``spec``'s dataset repo, from the mirror when one is set, else from the hub.

    From the hub, only the files of the task's configs (plus ``extra_configs``, (config, split) pairs)
    are downloaded.
    """
    mirror = data_dir_from_env(data_dir)
    if mirror is not None:
        return _locate_in_mirror(spec, mirror, accept_drift=accept_drift)
    return _download_from_hub(spec, extra_configs)


def _locate_in_mirror(spec: TaskSpec, mirror: Path, *, accept_drift: bool) -> LocatedRepo:
    if not mirror.is_dir():
        raise FileNotFoundError(
            f"{DATA_DIR_ENV} / data_dir points to {mirror}, which is not a folder; create it with the hub layout "
            f"<dir>/<org>/<repo>/ or unset {DATA_DIR_ENV} to download from the hub"
        )
    root = mirror / spec.hub_org / spec.hub_repo_name
    if not root.resolve().is_relative_to(mirror.resolve()):
        raise ValueError(f"{root} resolves outside the mirror {mirror}; symlinks out of the mirror are refused")
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root} is missing from the local mirror {mirror}: task {spec.name} needs the hub repo {spec.hub_repo}. "
            f"Download it with `huggingface-cli download {spec.hub_repo} --repo-type dataset"
            f"{' --revision ' + spec.revision if spec.revision else ''} --local-dir {root}`"
        )
    recorded = recorded_mirror_revision(root)
    if spec.revision is not None and recorded is not None and recorded != spec.revision and not accept_drift:
        raise ValueError(
            f"{root} holds revision {recorded} but {spec.name} is pinned to {spec.revision}; download the pinned "
            "revision, or pass accept_drift=True (--accept-drift) to evaluate on it anyway"
        )
    revision = recorded or spec.revision or "unknown-local-mirror"
    return LocatedRepo(root=root, revision=revision, source="mirror")


def recorded_mirror_revision(root: Path) -> str | None:
    """The commit a mirror was downloaded at, as `huggingface-cli download --local-dir` records it."""
    metadata = root / ".cache" / "huggingface" / "download" / f"{README}.metadata"
    if not metadata.is_file():
        return None
    first_line = metadata.read_text(encoding="utf-8").split("\n", 1)[0].strip()
    return first_line if _COMMIT.match(first_line) else None


def _download_from_hub(spec: TaskSpec, extra_configs: Sequence[tuple[str, str]]) -> LocatedRepo:
    from huggingface_hub import hf_hub_download, snapshot_download

    revision = spec.revision or "main"
    try:
        readme = Path(hf_hub_download(spec.hub_repo, README, repo_type="dataset", revision=revision))
        layout = config_files(read_front_matter(readme.parent), readme)
        wanted = _needed_files(spec, layout, extra_configs)
        root = Path(snapshot_download(spec.hub_repo, repo_type="dataset", revision=revision, allow_patterns=wanted))
    except (OSError, ValueError) as error:
        if isinstance(error, ValueError) and "front matter" in str(error):
            raise
        raise ConnectionError(
            f"could not download {spec.hub_repo} at revision {revision} for task {spec.name} ({error}). "
            f"Offline or air-gapped? Put a copy of the repo in the hub layout under a folder and set "
            f"{DATA_DIR_ENV} to it (<dir>/{spec.hub_repo}/README.md, ...)."
        ) from error
    return LocatedRepo(root=root, revision=root.name if _COMMIT.match(root.name) else revision, source="hub")


def _needed_files(
    spec: TaskSpec, layout: dict[str, dict[str, list[str]]], extra_configs: Sequence[tuple[str, str]]
) -> list[str]:
    wanted = [README]
    pairs = [(entry["config"], entry["split"]) for entry in [*spec.configs.values(), *spec.candidate_configs.values()]]
    for config, split in [*pairs, *extra_configs]:
        wanted.extend(layout.get(config, {}).get(split, []))
    return wanted
