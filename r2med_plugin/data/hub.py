"""Where a task's dataset repo lives: a local mirror (R2MED_DATA_DIR) or a hub snapshot."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from r2med_plugin.data.layout import README, DatasetCardError, config_files, read_front_matter
from r2med_plugin.errors import MissingFileError, UnreachableError, UserError
from r2med_plugin.types import TaskSpec

logger = logging.getLogger(__name__)
DATA_DIR_ENV = "R2MED_DATA_DIR"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
UNKNOWN_MIRROR_REVISION = "unknown-local-mirror"  # replaced by a fingerprint of the files once they are known


@dataclass(frozen=True)
class LocatedRepo:
    root: Path
    revision: str
    source: str  # "mirror" or "hub"
    trusted_root: Path  # files, once links are followed, must lie inside this folder
    verified: bool = True  # False: a mirror that records no commit; ``revision`` is then only what it should be


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
        raise MissingFileError(
            f"{DATA_DIR_ENV} / data_dir points to {mirror}, which is not a folder; create it with the hub layout "
            f"<dir>/<org>/<repo>/ or unset {DATA_DIR_ENV} to download from the hub"
        )
    root = mirror / spec.hub_org / spec.hub_repo_name
    if not root.resolve().is_relative_to(mirror.resolve()):
        raise UserError(f"{root} resolves outside the mirror {mirror}; symlinks out of the mirror are refused")
    if not root.is_dir():
        raise MissingFileError(
            f"{root} is missing from the local mirror {mirror}: task {spec.name} needs the hub repo {spec.hub_repo}. "
            f"Download it with `huggingface-cli download {spec.hub_repo} --repo-type dataset"
            f"{' --revision ' + spec.revision if spec.revision else ''} --local-dir {root}`"
        )
    recorded = recorded_mirror_revision(root)
    if spec.revision is not None and recorded is not None and recorded != spec.revision and not accept_drift:
        raise UserError(
            f"{root} holds revision {recorded} but {spec.name} is pinned to {spec.revision}; download the pinned "
            "revision, or pass accept_drift=True (--accept-drift) to evaluate on it anyway"
        )
    revision = recorded or spec.revision or UNKNOWN_MIRROR_REVISION
    return LocatedRepo(root=root, revision=revision, source="mirror", trusted_root=mirror, verified=recorded is not None)


def recorded_mirror_revision(root: Path) -> str | None:
    """The commit a mirror was downloaded at, as `huggingface-cli download --local-dir` records it."""
    metadata = root / ".cache" / "huggingface" / "download" / f"{README}.metadata"
    if not metadata.is_file():
        return None
    first_line = metadata.read_text(encoding="utf-8").split("\n", 1)[0].strip()
    return first_line if _COMMIT.match(first_line) else None


def mirror_files_verified(root: Path, files: Sequence[Path], commit: str,
                          published: Mapping[str, Mapping[str, object]] | None = None) -> bool:
    """Whether every file is proven to be ``commit``'s (see ``unverified_files``)."""
    return not unverified_files(root, files, commit, published)


def unverified_files(root: Path, files: Sequence[Path], commit: str,
                     published: Mapping[str, Mapping[str, object]] | None = None) -> dict[str, str]:
    """File (relative path) -> why it is not proven to be ``commit``'s; empty when all are.

    Each file, by the first rule that applies:
    1. its size and SHA-256 are published for ``commit`` (``published``: name -> {bytes, sha256}): it is proven
       exactly when it hashes to them, whoever put it there (huggingface-cli, git clone, rsync, a copy), and a
       file that contradicts them is never proven, whatever its download record says;
    2. its download record (`huggingface-cli download --local-dir`) gives an etag that is a content hash (the
       SHA-256 of an LFS file, the git blob SHA-1 of a small one): proven when the bytes hash to it;
    3. the record itself: made at ``commit``, and the file not modified since (huggingface_hub's own rule:
       mtime at most 1 s after the recorded timestamp).
    The dataset card (README.md) only maps configs to files: without a record of its own, it is proven when
    every file read was proven by rule 1 (a card pointing at other files would have failed there).
    """
    published = published or {}
    reasons: dict[str, str] = {}
    by_hash = []
    card = None
    for path in files:
        name = path.relative_to(root).as_posix()
        if name == README:
            card = path
            continue
        if name in published:
            reason = _contradicts_published(path, published[name])
            by_hash.append(reason is None)
        else:
            reason = _record_disproves(root, path, commit)
        if reason is not None:
            reasons[name] = reason
    if card is not None:
        reason = _record_disproves(root, card, commit)
        if reason is not None and not (by_hash and all(by_hash)):
            reasons[README] = reason
    return reasons


def _contradicts_published(path: Path, expected: Mapping[str, Any]) -> str | None:
    from r2med_plugin.data.fingerprint import file_sha256

    size = path.stat().st_size
    if "bytes" in expected and size != expected["bytes"]:
        return f"{size:,} bytes where the revision's file has {int(expected['bytes']):,} (published size)"
    actual = file_sha256(path)
    if actual != expected["sha256"]:
        return f"SHA-256 {actual[:12]}... differs from the revision's published {str(expected['sha256'])[:12]}..."
    return None


def _record_disproves(root: Path, path: Path, commit: str) -> str | None:
    metadata = root / ".cache" / "huggingface" / "download" / f"{path.relative_to(root).as_posix()}.metadata"
    try:
        recorded_commit, etag, timestamp = metadata.read_text(encoding="utf-8").split("\n")[:3]
        recorded_at = float(timestamp)
    except (OSError, ValueError):
        return "no download record (huggingface-cli download --local-dir writes one) and no published hash"
    if recorded_commit.strip() != commit:
        return f"downloaded at {recorded_commit.strip()[:12]}, not {commit[:12]}"
    etag = etag.strip().strip('"').lower()
    if _SHA256.match(etag) or _COMMIT.match(etag):
        from r2med_plugin.data.fingerprint import file_git_blob_sha1, file_sha256

        actual = file_sha256(path) if len(etag) == 64 else file_git_blob_sha1(path)
        return None if actual == etag else "its bytes differ from the etag its download record holds"
    if path.stat().st_mtime - 1 > recorded_at:
        return "modified after its download"
    return None


RETRIES_ENV = "R2MED_HUB_RETRIES"


def _is_transient(error: BaseException) -> bool:
    """Server errors (5xx, 429) and dropped or timed-out connections: worth another try."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    if isinstance(error, (OfflineModeIsEnabled, LocalEntryNotFoundError)):
        return False
    if isinstance(error, HfHubHTTPError):
        status = getattr(getattr(error, "response", None), "status_code", None)
        return status is not None and (status >= 500 or status == 429)
    name = type(error).__name__
    return isinstance(error, (ConnectionError, TimeoutError)) or name in {
        "ConnectError", "ReadError", "RemoteProtocolError", "ReadTimeout", "ConnectTimeout", "WriteError", "ChunkedEncodingError",
    }


def _download_once(spec: TaskSpec, revision: str, extra_configs: Sequence[tuple[str, str]]) -> Path:
    from huggingface_hub import hf_hub_download, snapshot_download

    readme = Path(hf_hub_download(spec.hub_repo, README, repo_type="dataset", revision=revision))
    layout = config_files(read_front_matter(readme.parent), readme)
    wanted = _needed_files(spec, layout, extra_configs)
    return Path(snapshot_download(spec.hub_repo, repo_type="dataset", revision=revision, allow_patterns=wanted))


def _download_from_hub(spec: TaskSpec, extra_configs: Sequence[tuple[str, str]]) -> LocatedRepo:
    revision = spec.revision or "main"
    attempts = max(1, int(os.environ.get(RETRIES_ENV) or 4))
    for attempt in range(1, attempts + 1):
        try:
            root = _download_once(spec, revision, extra_configs)
            break
        except Exception as error:  # noqa: BLE001 - sorted into transient (retried) and final below
            if isinstance(error, DatasetCardError):
                raise
            if attempt < attempts and _is_transient(error):
                logger.warning("download of %s failed (%s); retrying (%d/%d)", spec.hub_repo, type(error).__name__, attempt, attempts - 1)
                time.sleep(min(8.0, 0.25 * 2**attempt))
                continue
            if not isinstance(error, (OSError, ValueError, ConnectionError, TimeoutError)) and not _is_transient(error):
                raise
            raise UnreachableError(
                f"could not download {spec.hub_repo} at revision {revision} for task {spec.name} "
                f"({type(error).__name__}: {without_secrets(str(error))}). Offline or air-gapped? Put a copy of the "
                f"repo in the hub layout under a folder and set {DATA_DIR_ENV} to it (<dir>/{spec.hub_repo}/README.md, ...)."
            ) from None
    # <cache>/datasets--org--repo/snapshots/<commit>/ links to <cache>/datasets--org--repo/blobs/
    return LocatedRepo(root=root, revision=root.name if _COMMIT.match(root.name) else revision, source="hub", trusted_root=root.parent.parent)


def without_secrets(message: str) -> str:
    """Error texts may echo request details: never let a token through."""
    message = re.sub(r"hf_[A-Za-z0-9]{8,}", "hf_***", message)
    message = re.sub(r"(?i)(authorization|token)([=:]\s*)(bearer\s+)?\S+", r"\1\2***", message)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        secret = os.environ.get(name)
        if secret:
            message = message.replace(secret, "***")
    return message


def evict_from_hub_cache(path: Path) -> bool:
    """Remove a downloaded file (its snapshot link and blob) so that the next load downloads it again."""
    removed = False
    for candidate in {path, path.resolve()}:
        try:
            candidate.unlink()
            removed = True
        except FileNotFoundError:
            pass
    return removed


def _needed_files(
    spec: TaskSpec, layout: dict[str, dict[str, list[str]]], extra_configs: Sequence[tuple[str, str]]
) -> list[str]:
    wanted = [README]
    pairs = [(entry["config"], entry["split"]) for entry in [*spec.configs.values(), *spec.candidate_configs.values()]]
    for config, split in [*pairs, *extra_configs]:
        wanted.extend(layout.get(config, {}).get(split, []))
    return wanted
