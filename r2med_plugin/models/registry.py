"""One registry of retrievers and rerankers: ``resolve(name)`` says what a name is (a BM25, a model that
ships in a package, a local folder, a hub model, or a name a model loader claims: one mteb knows, an
``openai:<model>`` endpoint), how to load it, and what identifies it before loading.

Every command resolves names here: ``r2med evaluate``, ``r2med sweep`` (its "already done" stamps) and
the Python API (``load_encoder``, ``load_reranker``), so one name means one thing everywhere.

Model loaders beyond sentence-transformers are plugins (``ModelLoader``): this module never imports
them. They are found through the entry-point group ``r2med_plugin.model_loaders`` (this package declares
``mteb`` (r2med_plugin/integrations/mteb_models.py), ``openai`` and ``official`` (r2med_plugin/models/) there) or
added with ``register_loader``. With
``loader="auto"`` a hub name goes to the first loader whose ``auto`` flag is set and that claims it
(mteb, when it has a ModelMeta for the name), else to sentence-transformers; ``name:...`` goes to the
loader whose ``scheme`` is ``name`` (``openai:text-embedding-3-small``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import BM25_VARIANTS
from r2med_plugin.models.identity import PACKAGED_MODELS, packaged_model_folder
from r2med_plugin.request_options import EMBEDDING_ENDPOINT_OPTIONS
from r2med_plugin.rules import SettingError
from r2med_plugin.version import __version__

RetrieverKind = Literal["bm25", "packaged", "folder", "hub", "plugin"]
SENTENCE_TRANSFORMERS = "sentence-transformers"
AUTO = "auto"
ENTRY_POINT_GROUP = "r2med_plugin.model_loaders"
ENDPOINT_SETTINGS = EMBEDDING_ENDPOINT_OPTIONS  # what an endpoint loader takes


@dataclass(frozen=True)
class RetrieverRef:
    name: str  # as given
    kind: RetrieverKind
    source: str  # what loads: the BM25 name, the folder, the hub id, or the id the plugin loader gets
    revision: str | None = None  # the requested hub revision (a folder's label)
    loader: str = SENTENCE_TRANSFORMERS  # who loads it: sentence-transformers, or a plugin loader's name
    settings: tuple[tuple[str, Any], ...] = ()  # a plugin loader's settings (endpoint URL, dimensions, ...)
    shadows: str = ""  # the loader ``auto`` would have chosen (mteb), when sentence-transformers was forced instead

    def stamp(self) -> str:
        """What the model is, without loading it: the plugin version (how the numbers are computed), then the
        files (their content) of a folder or package, or the commit the hub cache holds for the revision
        (a plugin loader says its own: mteb's ModelMeta name and revision, an endpoint's host and model)."""
        code = f"r2med-plugin-{__version__}"
        if self.kind == "bm25":
            return code
        if self.kind == "plugin":
            return f"{code}:{self.loader}:{loader_named(self.loader).stamp(self)}"
        if self.kind in ("folder", "packaged"):
            folder = Path(self.source)
            return f"{code}:path:{self.revision or '-'}:{files_stamp(folder) if folder.is_dir() else files_stamp(folder.parent)}"
        commit = self.revision or cached_hub_commit(self.source, "model", "main")
        if commit is None and "/" not in self.source:  # sentence-transformers completes bare names ("all-MiniLM-L6-v2")
            commit = cached_hub_commit(f"sentence-transformers/{self.source}", "model", "main")
        return f"{code}:hub:{commit or 'unresolved'}"

    @property
    def instruction_refusal(self) -> tuple[str, str] | None:
        """(why, fix) when the official instruction (``--instruction``, a spec's ``instruction: true``) would reach no
        code of this model, else None: mteb's implementations apply their own prompts and the task's instruction,
        the official profiles apply the official code's per task. The one place this rule is written."""
        if self.loader == "mteb":
            return (f"{self.name} loads through mteb, which applies the model's own prompts and the task's instruction",
                    "add --loader sentence-transformers (a spec: loader: sentence-transformers) to prepend the official "
                    "prompt, or drop instruction")
        if self.loader == "official":
            return (f"{self.name} is an official profile: it applies the official code's instructions for each task "
                    "itself", "drop instruction")
        return None

    def load_encoder(self, **options: Any):
        """An Encoder (r2med_plugin.retrieval.dense): a SentenceTransformerEncoder (options: device, devices,
        batch_size, show_progress, name), or what the plugin loader builds (it takes the same options)."""
        if self.kind == "bm25":
            raise UserError(f"{self.name} is a BM25 retriever, not a model to encode with")
        if self.kind == "plugin":
            return loader_named(self.loader).load_encoder(self, **options)
        from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

        if self.shadows and not options.get("name"):
            # another protocol than the default (no mteb prompts): its results are filed apart, never over the default's
            options = {**options, "name": f"{self.name}+{SENTENCE_TRANSFORMERS}"}
        return SentenceTransformerEncoder(self.name, revision=self.revision, **options)

    def load_cross_encoder(self, **options: Any):
        """A pair scorer or Reranker: a SentenceTransformerCrossEncoder (options: device, batch_size, max_length),
        or what the plugin loader builds."""
        if self.kind == "bm25":
            raise UserError(f"{self.name} is a BM25 retriever, not a cross-encoder")
        if self.kind == "plugin":
            return loader_named(self.loader).load_cross_encoder(self, **options)
        from r2med_plugin.models.cross_encoder import SentenceTransformerCrossEncoder

        return SentenceTransformerCrossEncoder(self.name, revision=self.revision, **options)


# --- model loaders (plugins) ------------------------------------------------------------------------------


@runtime_checkable
class ModelLoader(Protocol):
    """A way to load models by name, beside sentence-transformers (mteb's registry, an embedding endpoint).

    ``name``: what ``loader=`` / ``--loader`` calls it. ``scheme``: names of the form ``<scheme>:<id>`` are
    its own (None: none). ``auto``: whether ``loader="auto"`` offers it plain hub names first.
    ``claim(name, revision, settings)`` returns a RetrieverRef (kind "plugin", loader=self.name) for a name
    it can load, else None; it must be cheap (no weights loaded). ``stamp(ref)`` identifies what would load.
    ``endpoint_options(name)``: the endpoint settings a ``<scheme>:<id>`` name takes; ``unclaimed_hint(name)``:
    the message for a name it does not claim under ``--loader`` (None: a generic one). Subclass
    ``ModelLoaderBase``, which gives these two their defaults (all of ``ENDPOINT_SETTINGS``; None)."""

    name: str
    scheme: str | None
    auto: bool

    def claim(self, name: str, revision: str | None, settings: Mapping[str, Any]) -> RetrieverRef | None: ...

    def stamp(self, ref: RetrieverRef) -> str: ...

    def load_encoder(self, ref: RetrieverRef, **options: Any) -> Any: ...

    def load_cross_encoder(self, ref: RetrieverRef, **options: Any) -> Any: ...

    def endpoint_options(self, name: str) -> tuple[str, ...]: ...

    def unclaimed_hint(self, name: str) -> str | None: ...


class ModelLoaderBase:
    """The base of every model loader: the defaults of ``ModelLoader``'s ``endpoint_options`` and ``unclaimed_hint``."""

    name: str
    scheme: str | None = None
    auto: bool = False

    def endpoint_options(self, name: str) -> tuple[str, ...]:
        return ENDPOINT_SETTINGS

    def unclaimed_hint(self, name: str) -> str | None:
        return None


def checked_loader(loader: object) -> ModelLoader:
    """``loader`` when it is a ``ModelLoader``; else a TypeError naming what it lacks and the fix."""
    if isinstance(loader, ModelLoader):
        return loader
    members = ("name", "scheme", "auto", "claim", "stamp", "load_encoder", "load_cross_encoder", "endpoint_options",
               "unclaimed_hint")
    lacking = [member for member in members if not hasattr(loader, member)]
    raise TypeError(f"{type(loader).__name__} is not a ModelLoader: it lacks {', '.join(lacking)}; subclass "
                    "r2med_plugin.models.registry.ModelLoaderBase (it gives endpoint_options and unclaimed_hint their defaults)")


_LOADERS: dict[str, ModelLoader] = {}
_DISCOVERED = False


def register_loader(loader: ModelLoader) -> None:
    """Add (or replace) a model loader under ``loader.name`` (entry points do this for the package's own)."""
    loader = checked_loader(loader)
    if loader.name in (AUTO, SENTENCE_TRANSFORMERS):
        raise UserError(f"the loader name {loader.name!r} is reserved")
    _LOADERS[loader.name] = loader


def loaders() -> dict[str, ModelLoader]:
    """The plugin loaders: those of the entry-point group (loaded once, on first use), and registered ones."""
    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        from importlib.metadata import entry_points

        for point in entry_points(group=ENTRY_POINT_GROUP):
            if point.name not in _LOADERS:
                _LOADERS.setdefault(point.name, checked_loader(point.load()))
    return dict(_LOADERS)


def loader_named(name: str) -> ModelLoader:
    found = loaders().get(name)
    if found is None:
        raise UserError(f"no model loader named {name!r}: use {', '.join(loader_choices())} "
                        "(reinstall r2med-plugin if mteb or openai are missing from this list)")
    return found


def loader_choices() -> list[str]:
    """What ``--loader`` accepts."""
    return [AUTO, SENTENCE_TRANSFORMERS, *sorted(loaders())]


def scheme_loader(name: str) -> ModelLoader | None:
    """The loader a ``<scheme>:<id>`` name belongs to (openai:<model>), else None."""
    return _scheme_loader(name)


def endpoint_options_of(name: str) -> tuple[str, ...]:
    """The endpoint settings (base_url, api_key_env, dimensions, concurrency, extra_body) a ``<scheme>:<id>`` name takes: all of
    them for an endpoint loader (openai:), what the loader's ``endpoint_options(name)`` says where it has one
    (official:openai takes three, official:bge none), and none for other names."""
    loader = _scheme_loader(name)
    return () if loader is None else tuple(loader.endpoint_options(name))


def _scheme_loader(name: str) -> ModelLoader | None:
    scheme, colon, rest = name.partition(":")
    if not colon or not rest or "/" in scheme or len(scheme) < 2:
        return None
    return next((loader for loader in loaders().values() if loader.scheme == scheme), None)


def resolve(name: str, revision: str | None = None, *, loader: str | None = None,
            settings: Mapping[str, Any] | None = None) -> RetrieverRef:
    """What ``name`` is: a BM25 (bm25-lucene, bm25-hakari[:<tokenizer>], bm25-robertson), ``<scheme>:<id>`` of a plugin loader (openai:<model>), a
    packaged model alias (minilm-packaged), an existing folder, a name a plugin loader claims (mteb's registry),
    else a hub model id for sentence-transformers.

    ``loader`` ("auto" when None) forces one: "sentence-transformers", or a plugin loader's name ("mteb").
    ``settings`` are a plugin loader's (base_url, dimensions, ...); a name that loads otherwise refuses them."""
    loader = loader or AUTO
    settings = {key: value for key, value in (settings or {}).items() if value is not None}
    if loader not in (AUTO, SENTENCE_TRANSFORMERS):
        loader_named(loader)  # an unknown loader name is refused first
    if name in BM25_VARIANTS:
        if loader != AUTO:
            raise SettingError(f"{{loader}} {loader} chooses how a model loads; {name} is a BM25 retriever: drop {{loader}}",
                           field="loader")
        _no_settings(name, settings, "a BM25 retriever")
        return RetrieverRef(name, "bm25", name)
    by_scheme = _scheme_loader(name)
    if by_scheme is not None:
        if loader not in (AUTO, by_scheme.name):
            raise SettingError(f"{name!r} is loaded by the {by_scheme.name} loader; drop {{loader}} {loader}", field="loader")
        return _claimed(by_scheme, name, revision, settings)
    if loader not in (AUTO, SENTENCE_TRANSFORMERS):
        return _claimed(loader_named(loader), name, revision, settings)
    if loader == AUTO and name not in PACKAGED_MODELS and not Path(name).expanduser().exists():
        for candidate in loaders().values():
            if candidate.auto:
                ref = candidate.claim(name, revision, settings)
                if ref is not None:
                    return ref
    _refuse_near_miss(name)
    _no_settings(name, settings, "a sentence-transformers model")
    if name in PACKAGED_MODELS:
        if revision is not None:
            raise SettingError(f"{name} is one set of packaged weights: drop {{revision}} (got {revision!r})", field="revision")
        return RetrieverRef(name, "packaged", str(packaged_model_folder(name)))
    if Path(name).expanduser().exists():
        return RetrieverRef(name, "folder", str(Path(name).expanduser()), revision)
    shadows = _auto_loader_for(name, revision) if loader == SENTENCE_TRANSFORMERS else ""
    return RetrieverRef(name, "hub", name, revision, shadows=shadows)


def _refuse_near_miss(name: str) -> None:
    """A name close to a packaged model ("minilm-packagd") or to a loader's scheme ("opnai:<model>") is a typo, not
    a hub model to download: refused with the name it is close to, before any hub access. A hub id ("org/name")
    and an existing path are the user's to name."""
    if name in PACKAGED_MODELS or Path(name).expanduser().exists():
        return
    scheme, colon, rest = name.partition(":")
    if colon and rest and "/" not in scheme:  # no loader has this scheme (those were taken before)
        schemes = sorted({loader.scheme for loader in loaders().values() if loader.scheme})
        close = difflib.get_close_matches(scheme.lower(), schemes, n=1, cutoff=0.6)
        if close:
            raise UserError(f"unknown scheme {scheme!r} in {name!r}: did you mean {close[0]}:{rest}? (the schemes are "
                            f"{', '.join(f'{known}:<id>' for known in schemes)}; a hub model is named org/model)")
    if "/" not in name:
        close = difflib.get_close_matches(name.lower(), list(PACKAGED_MODELS), n=1, cutoff=0.8)
        if close:
            packaged = PACKAGED_MODELS[close[0]]
            raise UserError(f"unknown model {name!r}: did you mean {close[0]!r} (the packaged {packaged.hub_name}, "
                            f"from the {packaged.distribution} package)? A hub model is named org/model")


def _auto_loader_for(name: str, revision: str | None) -> str:
    """The loader ``auto`` would choose for ``name`` (one that claims it, or refuses only its revision), else ""."""
    for candidate in loaders().values():
        if candidate.auto:
            try:
                if candidate.claim(name, revision, {}) is not None:
                    return candidate.name
            except ValueError:
                return candidate.name
    return ""


def _claimed(loader: ModelLoader, name: str, revision: str | None, settings: Mapping[str, Any]) -> RetrieverRef:
    ref = loader.claim(name, revision, settings)
    if ref is None:
        hint = loader.unclaimed_hint(name)  # a loader may know better how to name its models
        if hint is not None:
            raise UserError(hint)
        raise SettingError(f"the {loader.name} loader does not know the model {name!r}; drop {{loader}} {loader.name} to "
                           "load it through sentence-transformers", field="loader")
    return ref


def _no_settings(name: str, settings: Mapping[str, Any], what: str) -> None:
    if settings:
        flags = ", ".join("--" + key.replace("_", "-") for key in sorted(settings))
        raise UserError(f"{flags} configure an embedding endpoint (openai:<model>); {name!r} is {what}: drop {flags}")


def load_encoder(name: str, revision: str | None = None, *, loader: str | None = None,
                 settings: Mapping[str, Any] | None = None, **options: Any):
    """The Encoder ``name`` stands for, loaded as ``r2med evaluate --retriever name`` loads it (Python API)."""
    return resolve(name, revision, loader=loader, settings=settings).load_encoder(**options)


def load_reranker(name: str, revision: str | None = None, *, loader: str | None = None, **options: Any):
    """The cross-encoder (pair scorer or Reranker) ``name`` stands for, as ``r2med evaluate --rerank name`` loads it."""
    return resolve(name, revision, loader=loader).load_cross_encoder(**options)


# --- identity without loading ------------------------------------------------------------------------------


def files_stamp(root: Path) -> str:
    """A fingerprint of the content of every file under ``root`` (hub metadata excluded): relative names and bytes, so
    an edit that keeps a file's size and time still changes it, and touching a file does not. Hashes are remembered
    per file state (r2med_plugin.data.fingerprint), so an unchanged folder is read once."""
    from r2med_plugin.data.fingerprint import files_fingerprint

    files = [path for path in root.rglob("*") if path.is_file() and path.relative_to(root).parts[0] != ".cache"]
    return files_fingerprint(files, root)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache the current environment names (HF_HUB_CACHE, else HF_HOME/hub, else the default),
    read now: huggingface_hub fixes its own value at import, before a sweep spec's `env:` is applied."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def cached_hub_commit(repo: str, repo_type: str, revision: str) -> str | None:
    """The commit ``revision`` points to in the local Hugging Face cache, if it was downloaded."""
    ref = hub_cache_dir() / f"{repo_type}s--{repo.replace('/', '--')}" / "refs" / revision
    try:
        return ref.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
