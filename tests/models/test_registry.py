"""Names resolve through mteb's model registry when mteb has a ModelMeta for them, else through
sentence-transformers; ``--loader`` forces one. For a plain sentence-transformers model (the packaged MiniLM,
made loadable by its hub name at the revision mteb pins) both loaders give identical embeddings and scores,
and results are filed under mteb's model name and revision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from r2med_plugin.errors import UserError
from r2med_plugin.models.registry import ModelLoaderBase, RetrieverRef, loader_choices, register_loader, resolve
from tests.offline_model import MODEL_NAME, MODEL_REVISION

pytestmark = pytest.mark.slow  # real models, loaded in child processes

ROOT = Path(__file__).resolve().parents[2]


def test_resolution_order_and_forced_loaders(tmp_path: Path):
    assert {"auto", "sentence-transformers", "mteb", "openai"} <= set(loader_choices())
    known = resolve(MODEL_NAME)
    assert (known.kind, known.loader, known.source, known.revision) == ("plugin", "mteb", MODEL_NAME, MODEL_REVISION)
    assert resolve("all-MiniLM-L6-v2").loader == "mteb"  # the name sentence-transformers would complete, too
    forced = resolve(MODEL_NAME, loader="sentence-transformers")
    assert (forced.kind, forced.loader) == ("hub", "sentence-transformers")
    assert resolve("org/not-in-mteb").kind == "hub"  # unknown to mteb: sentence-transformers, as before
    assert resolve("minilm-packaged").kind == "packaged"
    folder = tmp_path / "model"
    folder.mkdir()
    assert resolve(str(folder)).kind == "folder"  # a local folder never goes to mteb
    assert resolve("bm25-lucene").kind == "bm25"
    assert resolve("openai:m", settings={"base_url": "http://127.0.0.1:9/v1"}).loader == "openai"


@pytest.mark.parametrize("call, words", [
    (lambda: resolve("org/not-in-mteb", loader="mteb"), ["does not know the model", "drop --loader mteb"]),
    (lambda: resolve(MODEL_NAME, "v1"), ["pins revision " + MODEL_REVISION, "--loader sentence-transformers"]),
    (lambda: resolve("bm25-lucene", loader="mteb"), ["BM25 retriever", "drop --loader"]),
    (lambda: resolve("org/m", settings={"base_url": "http://x:1/v1"}), ["--base-url", "openai:<model>", "drop --base-url"]),
    (lambda: resolve(MODEL_NAME, settings={"dimensions": 8}), ["--dimensions", "drop --dimensions"]),
    (lambda: resolve("openai:m", loader="mteb"), ["openai loader", "drop --loader mteb"]),
    (lambda: resolve("org/m", loader="nope"), ["no model loader named 'nope'", "mteb"]),
    (lambda: resolve("openai:m", "v1", settings={"base_url": "http://x:1/v1"}), ["--model-revision"]),
])
def test_wrong_requests_name_the_argument_and_the_fix(call, words):
    with pytest.raises(UserError) as raised:
        call()
    message = raised.value.flag_message  # as the CLI prints it: the settings by their flags
    assert all(word in message for word in words), message


@pytest.mark.parametrize("name, guess", [
    ("minilm-packagd", "'minilm-packaged'"),
    ("MiniLM-Packaged", "'minilm-packaged'"),
    ("opnai:text-embedding-3-small", "openai:text-embedding-3-small"),
    ("OpenAI:emb", "openai:emb"),
    ("oficial:bge", "official:bge"),
])
def test_a_near_miss_of_a_packaged_model_or_a_scheme_gets_a_did_you_mean(name: str, guess: str, mirror_env: Path,
                                                                          monkeypatch: pytest.MonkeyPatch, capsys):
    """`--retriever minilm-packagd` went to the hub (an offline or not-found error; found by a third trial): a name
    close to a packaged model or a loader's scheme is refused with the name it is close to, before any hub access."""
    import huggingface_hub

    def no_hub(*args, **kwargs):
        raise AssertionError("the hub was asked")

    for attribute in ("hf_hub_download", "snapshot_download", "model_info"):
        monkeypatch.setattr(huggingface_hub, attribute, no_hub)
    with pytest.raises(ValueError, match=rf"did you mean {guess}"):
        resolve(name)
    from r2med_plugin.cli import main

    for option in ("--retriever", "--first-stage"):
        argv = ["evaluate", "--task", "NanoR2MEDBioinformatics", option, name, *(["--rerank", "minilm-packaged"] if option == "--first-stage" else [])]
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert f"did you mean {guess}" in error and "hub" not in error.split("did you mean")[0], error
    assert main(["evaluate", "--task", "NanoR2MEDBioinformatics", "--first-stage", "bm25-robertson", "--rerank", name]) == 2
    assert f"did you mean {guess}" in capsys.readouterr().err


def test_names_far_from_a_packaged_model_or_a_scheme_still_go_to_the_hub():
    assert resolve("org/minilm-packagd").kind == "hub"  # a hub id (org/name) is the user's to name
    assert resolve("packaged-minilm-of-mine").kind == "hub"
    assert resolve("paraphrase-MiniLM-L3-v2").kind in ("hub", "plugin")


def test_a_cross_encoder_of_mteb_is_no_first_stage_and_an_embedder_no_reranker():
    import mteb

    cross = next(meta.name for meta in mteb.get_model_metas() if meta.is_cross_encoder and meta.loader is not None)
    with pytest.raises(ValueError, match="is a cross-encoder in mteb's registry"):
        resolve(cross).load_encoder()
    with pytest.raises(ValueError, match="not a cross-encoder"):
        resolve(MODEL_NAME).load_cross_encoder()


def test_loaders_are_plugins_registered_by_name(mirror_env: Path):
    """A third-party loader plugs in through register_loader (or the entry-point group) and is reached by
    --loader, its scheme, and the Python API alike."""
    from r2med_plugin import evaluate_task
    from r2med_plugin.models.hashing import HashingEncoder

    class Toy(ModelLoaderBase):
        name, scheme, auto = "toy", "toy", False

        def claim(self, name, revision, settings):
            return RetrieverRef(name, "plugin", name.split(":", 1)[1], None, loader="toy")

        def stamp(self, ref):
            return f"toy:{ref.source}"

        def load_encoder(self, ref, **options):
            return HashingEncoder(dim=int(ref.source), name=f"toy-{ref.source}")

        def load_cross_encoder(self, ref, **options):
            raise ValueError("no")

    register_loader(Toy())
    assert resolve("toy:32").stamp().endswith(":toy:toy:32")
    result = evaluate_task("NanoR2MEDBiology", resolve("toy:32").load_encoder(), show_progress=False)
    assert result.retriever == "toy-32" and result.model_revision == "dim32"


SCRIPT = """
import json, sys
from pathlib import Path
from tests.offline_model import populate_hf_cache
name = populate_hf_cache(Path(sys.argv[1]))
import numpy as np
from r2med_plugin import load_task
from r2med_plugin.models.registry import load_encoder
data = load_task("NanoR2MEDBiology")
via_mteb = load_encoder(name, show_progress=False)
via_st = load_encoder(name, loader="sentence-transformers", show_progress=False)
bound = via_mteb.for_task(data.name)
out = {"types": [type(via_mteb).__name__, type(via_st).__name__], "names": [via_mteb.name, via_st.name],
       "revisions": [via_mteb.revision, via_st.revision]}
for kind, texts in (("query", data.queries["text"].to_list()), ("document", data.corpus["text"].to_list()[:64])):
    a, b = bound.encode(texts, kind=kind), via_st.encode(texts, kind=kind)
    out[kind] = {"equal": bool(np.array_equal(a, b)), "max_abs": float(np.abs(a - b).max()), "shape": list(a.shape)}
print(json.dumps(out))
"""


@pytest.fixture()
def hf_env(mirror_env: Path, tmp_path: Path) -> dict[str, str]:
    from tests.offline_model import populate_hf_cache

    hf_home = tmp_path / "hf"
    populate_hf_cache(hf_home)
    env = {**os.environ, "HF_HOME": str(hf_home), "PYTHONPATH": str(ROOT), "R2MED_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("SENTENCE_TRANSFORMERS_HOME", None)
    env.pop("HF_HUB_CACHE", None)
    return env


def test_both_loaders_give_identical_embeddings_for_a_plain_sentence_transformers_model(hf_env: dict[str, str]):
    done = subprocess.run([sys.executable, "-c", SCRIPT, hf_env["HF_HOME"]], env=hf_env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["types"] == ["MtebEncoder", "SentenceTransformerEncoder"]
    # the forced loader files its results apart (another protocol than mteb's), the weights are the same revision
    assert found["names"] == [MODEL_NAME, f"{MODEL_NAME}+sentence-transformers"] and found["revisions"] == [MODEL_REVISION] * 2
    for kind in ("query", "document"):
        assert found[kind]["equal"], found  # bit for bit: mteb adds no prompt for a plain sentence-transformers model
        assert found[kind]["shape"][1] == 384


def test_r2med_evaluate_through_mteb_equals_sentence_transformers_and_files_under_mtebs_name(hf_env: dict[str, str], tmp_path: Path):
    out = tmp_path / "out"  # one output folder: the two loaders' results never overwrite each other

    def run(filed_as: str, *extra: str) -> tuple[list[str], dict]:
        command = [sys.executable, "-m", "r2med_plugin.cli", "evaluate", "--task", "NanoR2MEDBiology", "--retriever", MODEL_NAME,
                   "--hybrid", "--quiet", "--output", str(out), *extra]
        done = subprocess.run(command, env=hf_env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        (result,) = (out / "results" / filed_as.replace("/", "__") / MODEL_REVISION).glob("NanoR2MEDBiology.json")
        scores = [line for line in done.stdout.splitlines() if line.startswith("  ") and "wrote" not in line]
        return scores, json.loads(result.read_text())

    mteb_scores, mteb_result = run(MODEL_NAME)
    # forcing sentence-transformers for a name mteb knows is another protocol: filed apart, under its own name
    st_scores, st_result = run(f"{MODEL_NAME}+sentence-transformers", "--loader", "sentence-transformers")
    assert (out / "results" / MODEL_NAME.replace("/", "__") / MODEL_REVISION / "NanoR2MEDBiology.json").is_file()
    assert mteb_scores[1:] == st_scores[1:] and any("hybrid_ndcg_at_10" in line for line in mteb_scores)  # [0]: the names
    assert mteb_result["scores"] == st_result["scores"]
    assert mteb_result["r2med_provenance"]["model_name"] == MODEL_NAME
    assert mteb_result["r2med_provenance"]["model_revision"] == MODEL_REVISION


def test_a_sweep_spec_names_the_near_miss_at_load(tmp_path: Path):
    import yaml

    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"output": "out", "tasks": ["NanoR2MEDBioinformatics"], "retrievers": [{"model": "minilm-packagd"}]}))
    with pytest.raises(SpecError, match=r"retrievers\[0\].*did you mean 'minilm-packaged'"):
        load_spec(spec)
