"""``--retriever official:<name>``: the dense retrievers of the official R2MED code as profiles.

The profiles are data extracted from src/eval_retrieval.py, src/utils.py and src/instrcution.py of R2MED/R2MED@62b7074
(scripts/extract_official_retrievers.py). Here they are checked against facts we did not extract (the dataset card
instructions in task_metadata/, the reference catalog when it is beside the repository), and each encoder against
the official class's recipe computed independently on tiny seeded checkpoints: one text at a time (no padding) where
the official code pads a batch, by hand where it pools. The official classes themselves, run unchanged on the same
checkpoints, are compared in benchmarks/official_dense_parity.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from r2med_plugin import load_encoder
from r2med_plugin.catalog import list_tasks
from r2med_plugin.errors import UserError
from r2med_plugin.models.official.naming import profile_of_result, published_row_of
from r2med_plugin.models.official.profiles import profile_source, retriever_profiles
from r2med_plugin.models.registry import resolve
from r2med_plugin.rules import SettingError
from tests.support.tiny_official import build_all

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["the cell divides", "gene expression in the liver cell\nand the kidney", "protein binds " * 300, "a"]
TASK = "R2MEDBiology"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, fixture_mirror) -> dict[str, Path]:
    """The tiny checkpoints, with a vocabulary of the fixture task's words (so that its documents differ)."""
    task_texts = [json.loads(line)["text"] for name in ("corpus.jsonl", "query.jsonl")
                  for line in (fixture_mirror / "R2MED" / "Biology" / name).read_text(encoding="utf-8").splitlines()]
    return build_all(tmp_path_factory.mktemp("official-tiny"), TEXTS + task_texts)


def _encoder(name: str, **options):
    return load_encoder(name, show_progress=False, **options).for_task(TASK)


def _hidden(folder: Path, text: str, **tokenize) -> torch.Tensor:
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        inputs = tokenizer(text, return_tensors="pt", **tokenize)
        return model(**inputs).last_hidden_state[0], inputs


# --- the profiles -------------------------------------------------------------------------------------------------


def test_profiles_cover_every_official_retriever_and_record_their_source():
    profiles = retriever_profiles()
    assert list(profiles) == ["contriever", "medcpt", "inst-l", "inst-xl", "bmr-410m", "bmr-2b", "bmr-7b", "bge", "e5",
                              "grit", "sfr", "nv", "openai", "voyage"]
    assert profile_source()["commit"].startswith("62b7074")
    assert "extract_official_retrievers.py" in profile_source()["extracted_by"]
    expected = {"contriever": ("FlagDRESModel", "mean", False, 512), "bge": ("FlagDRESModel", "cls", True, 512),
                "bmr-410m": ("FlagDRESModel", "last-bmr", True, 512), "bmr-2b": ("FlagDRESModel", "last-bmr", True, 1024),
                "bmr-7b": ("HighScaleModel", "last-bmr", True, 2048), "e5": ("HighScaleModel", "last", True, 2048),
                "sfr": ("HighScaleModel", "last", True, 2048)}
    for name, (model_class, pooling, normalise, max_length) in expected.items():
        arguments = profiles[name].arguments
        assert (profiles[name].model_class, arguments["pooling_method"], arguments["normalize_embeddings"],
                arguments["max_length"]) == (model_class, pooling, normalise, max_length)
    # the official init_model passes the article tower for both MedCPT towers; the listed pair stays recorded
    assert profiles["medcpt"].checkpoint == ("ncbi/MedCPT-Query-Encoder", "ncbi/MedCPT-Article-Encoder")
    assert profiles["medcpt"].arguments["query_encoder_name_or_path"] == "ncbi/MedCPT-Article-Encoder"
    assert resolve("official:medcpt").source == "ncbi/MedCPT-Article-Encoder+ncbi/MedCPT-Article-Encoder"
    assert (profiles["nv"].arguments["max_length"], profiles["nv"].document_instruction) == (4096, "")
    assert (profiles["grit"].arguments["query_max_length"], profiles["grit"].arguments["doc_max_length"]) == (512, 2048)


def test_instructions_equal_the_dataset_cards_for_every_task():
    profiles = retriever_profiles()
    for spec in list_tasks("r2med"):
        hub, sentence = spec.hub_name, spec.instruction  # "Given a Biology post, retrieve relevant passages ..."
        for name in ("e5", "sfr", "nv"):
            assert profiles[name].instruction("query", hub) == f"Instruct: {sentence}\nQuery: "
        for name in ("bmr-410m", "bmr-2b", "bmr-7b"):
            assert profiles[name].instruction("query", hub) == f"{sentence}\nQuery: "
            assert profiles[name].instruction("document", hub) == "Represent this passage\npassage: "
        assert profiles["grit"].instruction("query", hub) == f"<|user|>\n{sentence}\n<|embed|>\n"
        assert profiles["grit"].instruction("document", hub) == "<|embed|>\n"
        for name in ("contriever", "medcpt", "openai", "voyage"):
            assert profiles[name].instruction("query", hub) is None and profiles[name].instruction("document", hub) is None
    catalog_path = ROOT / "reference" / "r2med_catalog.json"  # the reference facts, in the repository
    for entry in json.loads(catalog_path.read_text(encoding="utf-8"))["tasks"]:
        hub, given = entry["name"], entry["instructions"]
        assert profiles["inst-l"].instruction("query", hub) == given["instructor_query"]
        assert profiles["inst-xl"].instruction("document", hub) == given["instructor_doc"]
        assert profiles["bge"].instruction("query", hub) == given["bge_query"]
        assert profiles["e5"].instruction("query", hub) == given["e5_nv_sfr_query"]
        assert profiles["bmr-2b"].instruction("query", hub) == given["bmr_query"]
        assert profiles["grit"].instruction("query", hub) == given["grit_query"]


def test_every_profile_names_its_published_row():
    published = json.loads((ROOT / "r2med_plugin" / "reporting" / "r2med_leaderboard.json").read_text(encoding="utf-8"))
    labels = {row["retriever"] for row in published["rows"] if not row["llm"]}
    assert {profile.published_row for profile in retriever_profiles().values()} <= labels
    assert published_row_of("intfloat/e5-mistral-7b-instruct+official-e5") == "E5-mistral-7b-instruct"
    assert profile_of_result("some/model+official-nope") is None and published_row_of("intfloat/e5-mistral-7b-instruct") is None


# --- the encoders against the official recipes -----------------------------------------------------------------------


def test_bge_is_the_cls_vector_of_instruction_plus_text_normalised(tiny):
    encoder = _encoder(f"official:bge@{tiny['bert']}")
    instruction = retriever_profiles()["bge"].instruction("query", "Biology")
    queries, documents = encoder.encode(TEXTS, kind="query"), encoder.encode(TEXTS, kind="document")
    for row, text in enumerate(TEXTS):
        query = _hidden(tiny["bert"], instruction + text, truncation=True, max_length=512)[0][0]
        document = _hidden(tiny["bert"], text, truncation=True, max_length=512)[0][0]
        np.testing.assert_allclose(queries[row], (query / query.norm()).numpy(), atol=1e-5)
        np.testing.assert_allclose(documents[row], (document / document.norm()).numpy(), atol=1e-5)


def test_contriever_is_the_unnormalised_mean_and_expansions_average_raw_vectors(tiny):
    encoder = _encoder(f"official:contriever@{tiny['bert']}")
    got = encoder.encode(TEXTS, kind="query")
    for row, text in enumerate(TEXTS):
        hidden = _hidden(tiny["bert"], text, truncation=True, max_length=512)[0]
        np.testing.assert_allclose(got[row], hidden.mean(0).numpy(), atol=1e-5)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)
    np.testing.assert_allclose(encoder.encode_expansions(TEXTS), got, atol=1e-6)  # no instruction either way


def test_e5_pools_the_last_real_token_of_a_right_padded_batch(tiny):
    encoder = _encoder(f"official:e5@{tiny['llama-pad']}")
    instruction = retriever_profiles()["e5"].instruction("query", "Biology")
    got = encoder.encode(TEXTS, kind="query")
    for row, text in enumerate(TEXTS):
        hidden = _hidden(tiny["llama-pad"], instruction + text, truncation=True, max_length=2048)[0]
        np.testing.assert_allclose(got[row], (hidden[-1] / hidden[-1].norm()).numpy(), atol=1e-5)


def test_bmretriever_appends_eos_pads_left_and_keeps_the_raw_last_vector(tiny):
    encoder = _encoder(f"official:bmr-410m@{tiny['llama-bmr']}")
    profile = retriever_profiles()["bmr-410m"]
    got = encoder.encode(TEXTS, kind="document")
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny["llama-bmr"])
    model = AutoModel.from_pretrained(tiny["llama-bmr"]).eval()
    for row, text in enumerate(TEXTS):
        ids = tokenizer(profile.instruction("document", "Biology") + text, truncation=True, max_length=511)["input_ids"]
        assert len(ids) <= 511
        with torch.no_grad():
            hidden = model(input_ids=torch.tensor([ids + [tokenizer.eos_token_id]])).last_hidden_state[0]
        np.testing.assert_allclose(got[row], hidden[-1].numpy(), atol=1e-5)  # RoPE: left padding shifts no relative position
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)  # the BMR branch never normalises


def test_medcpt_queries_go_through_the_query_tower_and_articles_as_title_text_pairs(tiny):
    two_towers = _encoder(f"official:medcpt@{tiny['medcpt-query']}+{tiny['medcpt-article']}")
    queries, documents = two_towers.encode(TEXTS, kind="query"), two_towers.encode(TEXTS, kind="document")
    for row, text in enumerate(TEXTS):
        np.testing.assert_allclose(queries[row], _hidden(tiny["medcpt-query"], text, truncation=True, max_length=512)[0][0].numpy(), atol=1e-5)
        from transformers import AutoTokenizer

        pair = AutoTokenizer.from_pretrained(tiny["medcpt-article"])("", text, truncation="longest_first", max_length=512)
        assert pair["input_ids"][:2] == [4, 5]  # [CLS] (empty title) [SEP], then the text
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(tiny["medcpt-article"]), AutoModel.from_pretrained(tiny["medcpt-article"]).eval()
    with torch.no_grad():
        for row, text in enumerate(TEXTS):
            inputs = tokenizer("", text, truncation="longest_first", max_length=512, return_tensors="pt")
            np.testing.assert_allclose(documents[row], model(**inputs).last_hidden_state[0, 0].numpy(), atol=1e-5)
    assert "medcpt-query+" in two_towers.name
    assert two_towers.name.endswith("medcpt-article+official-medcpt")  # both towers name it: never the one-tower run's name
    default = _encoder(f"official:medcpt@{tiny['medcpt-article']}+{tiny['medcpt-article']}")  # the official init_model
    np.testing.assert_allclose(default.encode(TEXTS, kind="query")[0],
                               _hidden(tiny["medcpt-article"], TEXTS[0], truncation=True, max_length=512)[0][0].numpy(), atol=1e-5)


def test_instructor_leaves_the_instruction_out_of_the_pooling_and_gives_it_to_expansions(tiny):
    from sentence_transformers import SentenceTransformer

    encoder = _encoder(f"official:inst-l@{tiny['instructor']}")
    instruction = retriever_profiles()["inst-l"].instruction("query", "Biology")
    got = encoder.encode(TEXTS, kind="query")
    plain = SentenceTransformer(str(tiny["instructor"]), device="cpu")
    with_prompt_pooled = plain.encode(TEXTS, prompt=instruction, normalize_embeddings=True)
    assert not np.allclose(got, with_prompt_pooled, atol=1e-4)  # the instruction is not pooled
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(encoder.encode_expansions(TEXTS), got, atol=1e-6)  # the query instruction, as the official class


def test_nv_embed_calls_the_checkpoints_own_encode_with_the_instruction(tiny):
    from transformers import AutoModel

    encoder = _encoder(f"official:nv@{tiny['nv']}", dtype="float32")
    instruction = retriever_profiles()["nv"].instruction("query", "Biology")
    model = AutoModel.from_pretrained(tiny["nv"], trust_remote_code=True).eval()
    with torch.no_grad():
        expected = torch.nn.functional.normalize(model.encode(TEXTS, instruction=instruction, max_length=4096), dim=-1)
        documents = torch.nn.functional.normalize(model.encode(TEXTS, instruction="", max_length=4096), dim=-1)
    np.testing.assert_allclose(encoder.encode(TEXTS, kind="query"), expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(encoder.encode(TEXTS, kind="document"), documents.numpy(), atol=1e-5)
    np.testing.assert_allclose(encoder.encode_expansions(TEXTS), expected.numpy(), atol=1e-5)


# --- names, options and refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "words"), [
    (lambda: resolve("official:nope"), r"not a model of the official R2MED code.*official:e5.*official:rankllama"),
    (lambda: resolve("official:bge", settings={"base_url": "http://x/v1"}), r"--base-url configure an endpoint.*drop --base-url"),
    (lambda: resolve("official:openai", settings={"dimensions": 256}), r"--dimensions.*official size.*drop --dimensions"),
    (lambda: resolve("official:openai", "abc"), r"--model-revision reaches no code"),
    (lambda: resolve("official:openai@x"), r"API model.*no weights"),
    (lambda: resolve("official:medcpt@only-one"), r"two towers"),
    (lambda: resolve("BAAI/bge-large-en-v1.5", loader="official"), r"write official:bge \(--retriever official:bge\)"),
    (lambda: resolve("castorini/monobert-large-msmarco", loader="official"), r"write official:monobert \(--rerank"),
    (lambda: resolve("some/model", loader="official"), r"named official:<name> and need no --loader"),
    (lambda: resolve("official:medcpt@a/q+a/d", "abc123"), r"cannot pin two repositories.*--local-dir"),
    (lambda: resolve("official:e5").load_cross_encoder(), r"dense retriever of the official code.*first stage"),
    (lambda: resolve("official:monobert").load_encoder(), r"is a reranker"),
    (lambda: resolve("official:bge").load_encoder(devices=["cpu", "cpu"]), r"one device"),
])
def test_wrong_requests_name_the_fix(call, words):
    with pytest.raises(ValueError) as raised:
        call()
    assert re.search(words, raised.value.render("flag") if isinstance(raised.value, UserError) else str(raised.value))


@pytest.mark.parametrize(("call", "field", "flag"), [
    (lambda: resolve("official:openai", "abc"), "revision", "--model-revision reaches no code"),
    (lambda: resolve("official:openai", settings={"dimensions": 256}), "dimensions", "drop --dimensions"),
    (lambda: resolve("official:medcpt@a/q+a/d", "abc123"), "revision", "one --model-revision cannot pin two repositories"),
    (lambda: resolve("official:openai@x"), "retriever", "use openai:<model> --base-url URL"),
    (lambda: resolve("official:e5").load_cross_encoder(), "rerank", "(--retriever official:e5 or --first-stage official:e5)"),
    (lambda: resolve("official:monobert").load_encoder(), "retriever", "use it with --rerank, after a first stage (--first-stage)"),
    (lambda: resolve("official:bge").load_encoder(devices=["cpu", "cpu"]), "device", "--device cpu,cpu: official:bge"),
])
def test_refusals_name_their_setting_per_front_end(call, field, flag):
    with pytest.raises(SettingError) as raised:
        call()
    assert raised.value.field == field and flag in raised.value.render("flag")
    assert "(--" in str(raised.value)  # the Python API names the parameter beside its flag


def test_an_unbound_per_task_profile_and_a_prompt_are_refused(tiny):
    encoder = load_encoder(f"official:e5@{tiny['llama-pad']}", show_progress=False)
    with pytest.raises(ValueError, match=r"one instruction per task.*for_task"):
        encoder.encode(["x"], kind="query")
    with pytest.raises(ValueError, match=r"drop --instruction"):
        encoder.for_task(TASK).encode(["x"], kind="query", prompt="Query: ")
    assert encoder.for_task("NanoR2MEDBiology").instruction("query") == encoder.for_task(TASK).instruction("query")


def test_cache_identity_changes_with_task_instruction_and_weights(tiny):
    biology = _encoder(f"official:e5@{tiny['llama-pad']}")
    other_task = load_encoder(f"official:e5@{tiny['llama-pad']}", show_progress=False).for_task("R2MEDPMCClinical")
    other_recipe = _encoder(f"official:sfr@{tiny['llama-pad']}")  # same weights and instructions, another profile name
    other_weights = _encoder(f"official:e5@{tiny['llama-bmr']}")
    identities = {biology.cache_identity, other_task.cache_identity, other_recipe.cache_identity, other_weights.cache_identity}
    assert len(identities) == 4


# --- end to end: evaluate, sweep, leaderboard, the API profiles through a loopback server ---------------------------------


def test_evaluate_files_results_under_the_weights_and_the_profile(mirror_env, tiny, tmp_path, capsys):
    from r2med_plugin.cli import main

    out = tmp_path / "out"
    code = main(["evaluate", "--task", TASK, "--retriever", f"official:bge@{tiny['bert']}", "--expansion", "hyde/gpt4",
                 "--output", str(out), "--quiet"])
    assert code == 0
    official = [json.loads(path.read_text()) for path in (out / "official").rglob("R2MEDBiology.json")]
    # other weights than the official ones keep their own name (official:bge itself writes "bge", as the official files)
    assert [payload["model_name"] for payload in official] == [results_name(out).removeprefix("hyde/gpt4+")]
    assert sorted(official[0]["test"]) == sorted(f"{m}_at_{k}" for m in ("ndcg", "map", "recall", "precision")
                                                 for k in (1, 3, 5, 10, 100))  # k_values of retrieval_by_dense
    results = [p for p in (out / "results").rglob("R2MEDBiology.json")]
    assert len(results) == 1 and "bert+official-bge" in results[0].parent.parent.name
    assert main(["evaluate", "--task", TASK, "--retriever", f"official:bge@{tiny['bert']}", "--instruction", "--quiet"]) == 2
    assert "applies the official code's instructions" in capsys.readouterr().err


def results_name(out: Path) -> str:
    meta = next((out / "results").rglob("model_meta.json"))
    return json.loads(meta.read_text())["name"]


def test_official_short_names_and_published_rows_only_for_the_official_weights():
    from r2med_plugin.reporting.official_files import official_model_name

    assert official_model_name("BAAI/bge-large-en-v1.5+official-bge") == "bge"
    assert official_model_name("ncbi/MedCPT-Article-Encoder+official-medcpt") == "medcpt"
    assert official_model_name("my/finetune+official-bge") == "my/finetune+official-bge"
    assert published_row_of("ncbi/MedCPT-Article-Encoder+official-medcpt") == "MedCPT"
    for other in ("my/finetune+official-e5", "ncbi/MedCPT-Query-Encoder+ncbi/MedCPT-Article-Encoder+official-medcpt",
                  "intfloat/e5-mistral-7b-instruct+float16+official-e5"):
        assert published_row_of(other) is None


def test_another_dtype_files_apart_and_api_profiles_refuse_it(tiny):
    assert load_encoder(f"official:bge@{tiny['bert']}", dtype="float16", show_progress=False).name.endswith("bert+float16+official-bge")
    assert load_encoder(f"official:bge@{tiny['bert']}", dtype="float32", show_progress=False).name.endswith("bert+official-bge")
    with pytest.raises(ValueError, match=r"dtype reaches no code"):
        load_encoder("official:openai", settings={"base_url": "http://127.0.0.1:9/v1"}, dtype="float16")


def test_expansions_average_the_raw_official_embeddings(mirror_env, tiny):
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import Dense, expanded_queries
    from r2med_plugin.retrieval.dense import normalise

    data = load_task(TASK, accept_drift=True)
    encoder = load_encoder(f"official:contriever@{tiny['bert']}", show_progress=False)
    run = Dense(encoder, expansion="hyde/gpt4").search(data, depth=5)
    _, _, texts, expansions = expanded_queries(data, "hyde/gpt4", None)
    bound = encoder.for_task(TASK)
    mixed = normalise((bound.encode(texts, kind="query") + bound.encode_expansions(expansions)) / 2)
    documents = normalise(bound.encode(data.corpus["text"].to_list(), kind="document"))
    for row, query_id in enumerate(data.queries["id"].to_list()):
        scores = documents @ mixed[row]
        expected = dict(zip(data.corpus["id"].to_list(), scores.tolist(), strict=True))
        assert len(run[query_id]) == 5
        for doc_id, score in run[query_id].items():
            assert score == pytest.approx(expected[doc_id], abs=1e-5)
        assert min(run[query_id].values()) >= sorted(scores)[-5] - 1e-5  # the five best


def test_a_sweep_spec_names_an_official_profile(tmp_path, tiny):
    import yaml

    from r2med_plugin.sweep.spec import SpecError, load_spec

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK], "retrievers": [f"official:bge@{tiny['bert']}"]}))
    spec = load_spec(path)
    assert spec.retrievers[0]["model"] == f"official:bge@{tiny['bert']}"
    path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK],
                                    "retrievers": [{"model": f"official:bge@{tiny['bert']}", "instruction": True}]}))
    with pytest.raises(SpecError, match=r"official profile.*drop instruction"):
        load_spec(path)


def test_leaderboard_links_a_profile_row_to_its_published_row(tmp_path):
    from r2med_plugin.catalog import task_names
    from r2med_plugin.reporting.leaderboard import build_leaderboard
    from tests.reporting.test_reporting import write_result

    for task in task_names("r2med"):
        write_result(tmp_path, "intfloat/e5-mistral-7b-instruct+official-e5", task, 0.3)
    rows = build_leaderboard([tmp_path], compare_published=True)
    ours = next(row for row in rows if row.source == "yours")
    published = next(row for row in rows if row.source == "published" and row.retriever == "E5-mistral-7b-instruct" and not row.llm)
    assert ours.note.startswith(f"official:e5 profile, published E5-mistral-7b-instruct: {published.published_average:.2f} "
                                f"({30.0 - published.published_average:+.2f})")
    assert "official:e5 run: intfloat/e5-mistral-7b-instruct+official-e5" in published.note


def test_api_profiles_send_the_official_text_and_voyage_its_input_type(mirror_env, tmp_path, monkeypatch):
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-test")
    monkeypatch.setenv("VOYAGE_API_KEY", "sk-loopback-test")
    with LoopbackOpenAI(models=("text-embedding-3-large", "voyage-3")) as server:
        openai = load_encoder("official:openai", settings={"base_url": server.base_url}, show_progress=False).for_task(TASK)
        port = server.base_url.split(":")[2].split("/")[0]
        assert openai.name == f"text-embedding-3-large@127.0.0.1-{port}+official-openai"  # not the published API's server
        assert published_row_of(openai.name) is None
        openai.encode(['say "hi"\nnow'], kind="query")
        voyage = load_encoder("official:voyage", settings={"base_url": server.base_url}, show_progress=False).for_task(TASK)
        voyage.encode(["a document"], kind="document")
        voyage.encode(["a query"], kind="query")
        bodies = server.embedding_requests()
    assert bodies[0]["input"] == [json.dumps('say "hi" now')] and bodies[0]["encoding_format"] == "float"
    assert [(body["input_type"], body["encoding_format"]) for body in bodies[1:]] == [("document", "base64"), ("query", "base64")]


def test_base64_answers_decode_to_the_same_vectors_as_float_answers(mirror_env, tmp_path, monkeypatch):
    from r2med_plugin.models.embedding_endpoint import EndpointEncoder
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-test")
    with LoopbackOpenAI(models=("emb",)) as server:
        as_float = EndpointEncoder("emb", server.base_url, show_progress=False).encode(["one", "two"], kind="query")
        as_base64 = EndpointEncoder("emb", server.base_url, show_progress=False, encoding_format="base64").encode(["one", "two"], kind="query")
    np.testing.assert_allclose(as_base64, as_float, atol=0)


def test_grit_passes_the_official_instruction_and_lengths_to_gritlm(monkeypatch, tmp_path):
    """GritLM's own package does the encoding (as in the official GritModel); this checks the call it gets, through a
    stand-in ``gritlm`` module that records it (the real package needs a 7B checkpoint's remote code to mean anything)."""
    import sys
    import types

    calls = []

    class GritLM:
        def __init__(self, checkpoint, **options):
            calls.append(("init", checkpoint, options))

        def encode(self, texts, *, instruction, batch_size, max_length):
            calls.append(("encode", list(texts), instruction, batch_size, max_length))
            return np.ones((len(texts), 4), dtype=np.float32)

    monkeypatch.setitem(sys.modules, "gritlm", types.SimpleNamespace(GritLM=GritLM))
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    encoder = _encoder(f"official:grit@{tmp_path}", batch_size=2)
    encoder.encode(["q1", "q2", "q3"], kind="query")
    encoder.encode(["d1"], kind="document")
    encoder.encode_expansions(["e1"])
    query = retriever_profiles()["grit"].instruction("query", "Biology")
    assert calls == [("init", str(tmp_path), {"torch_dtype": "auto", "mode": "embedding", "device_map": {"": "cpu"}}),
                     ("encode", ["q1", "q2"], query, 2, 512), ("encode", ["q3"], query, 2, 512),
                     ("encode", ["d1"], "<|embed|>\n", 2, 2048), ("encode", ["e1"], query, 2, 512)]
    monkeypatch.setitem(sys.modules, "gritlm", None)
    with pytest.raises(ImportError, match=r"r2med-plugin\[grit\]"):
        load_encoder(f"official:grit@{tmp_path}")


def test_nv_embed_averages_an_expansion_in_float16_as_its_official_class(mirror_env, tiny):
    """NVEmbedModel returns float16 vectors and encode_queries averages them in float16 (numpy); the mean here too."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import Dense, expanded_queries
    from r2med_plugin.retrieval.dense import normalise

    data = load_task(TASK, accept_drift=True)
    encoder = load_encoder(f"official:nv@{tiny['nv']}", show_progress=False)  # float16, the official dtype
    assert encoder.for_task(TASK).expansion_mean_dtype == "float16"
    run = Dense(encoder, expansion="hyde/gpt4").search(data, depth=3)
    _, _, texts, expansions = expanded_queries(data, "hyde/gpt4", None)
    bound = encoder.for_task(TASK)
    half = (bound.encode(texts, kind="query").astype(np.float16) + bound.encode_expansions(expansions).astype(np.float16)) / np.float16(2)
    mixed = normalise(half.astype(np.float32))
    documents = normalise(bound.encode(data.corpus["text"].to_list(), kind="document"))
    expected = dict(zip(data.corpus["id"].to_list(), (documents @ mixed[0]).tolist(), strict=True))
    first = data.queries["id"][0]
    for doc_id, score in run[first].items():
        assert score == pytest.approx(expected[doc_id], abs=1e-6)
    assert load_encoder(f"official:nv@{tiny['nv']}", dtype="float32").for_task(TASK).expansion_mean_dtype == "float32"


def test_an_api_first_stage_leaves_device_to_a_local_reranker(mirror_env, tiny, tmp_path, monkeypatch, capsys):
    """--device drives the --rerank model; the API first stage runs on its server and is loaded without it."""
    from transformers import AutoTokenizer, BertForSequenceClassification

    from r2med_plugin.cli import main
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-test")
    monobert = tmp_path / "monobert"
    torch.manual_seed(0)
    BertForSequenceClassification.from_pretrained(tiny["bert"], num_labels=2).save_pretrained(monobert)
    AutoTokenizer.from_pretrained(tiny["bert"]).save_pretrained(monobert)
    with LoopbackOpenAI(models=("text-embedding-3-large",)) as server:
        base = ["evaluate", "--task", TASK, "--first-stage", "official:openai", "--base-url", server.base_url, "--quiet"]
        assert main([*base, "--rerank", f"official:monobert@{monobert}", "--rerank-depth", "10", "--device", "cpu"]) == 0
        alone = ["evaluate", "--task", TASK, "--retriever", "official:openai", "--base-url", server.base_url, "--quiet"]
        assert main([*alone, "--device", "cpu"]) == 2  # without a local reranker, --device reaches no code
    assert "runs on the endpoint's server" in capsys.readouterr().err


def test_a_folder_named_like_a_hub_id_is_never_the_published_checkpoint(tiny, tmp_path, monkeypatch):
    """A local copy at ./BAAI/bge-large-en-v1.5 (perhaps edited) files as <folder>+local, so its official JSON and the
    leaderboard never take it for the published weights; the same for an official reranker's folder."""
    import shutil

    from r2med_plugin.models.official.naming import official_reranker_name
    from r2med_plugin.models.registry import load_reranker
    from r2med_plugin.reporting.official_files import official_model_name

    shutil.copytree(tiny["bert"], tmp_path / "BAAI" / "bge-large-en-v1.5")
    monkeypatch.chdir(tmp_path)
    encoder = load_encoder("official:bge@BAAI/bge-large-en-v1.5", show_progress=False)
    assert encoder.name == "BAAI/bge-large-en-v1.5+local+official-bge"
    assert official_model_name(encoder.name) == encoder.name and published_row_of(encoder.name) is None
    from transformers import AutoTokenizer, BertForSequenceClassification

    folder = tmp_path / "castorini" / "monobert-large-msmarco"
    BertForSequenceClassification.from_pretrained(tiny["bert"], num_labels=2).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny["bert"]).save_pretrained(folder)
    reranker = load_reranker("official:monobert@castorini/monobert-large-msmarco")
    assert reranker.name == "castorini/monobert-large-msmarco+local+official-monobert"
    assert official_reranker_name(reranker.name) == reranker.name
    assert official_reranker_name("castorini/monobert-large-msmarco+official-monobert") == "monobert"


def test_official_runs_record_the_instructions_they_used(mirror_env, tiny, tmp_path):
    from r2med_plugin.cli import main

    out = tmp_path / "out"
    assert main(["evaluate", "--task", TASK, "--retriever", f"official:inst-l@{tiny['instructor']}", "--output", str(out),
                 "--quiet"]) == 0
    profile = retriever_profiles()["inst-l"]
    (metadata,) = (out / "official").rglob("R2MEDBiology.metadata.json")
    recorded = json.loads(metadata.read_text())["instructions"]
    assert recorded == {"query": profile.instruction("query", "Biology"), "document": profile.instruction("document", "Biology"),
                        "expansion": profile.instruction("query", "Biology")}
    (result,) = (out / "results").rglob("R2MEDBiology.json")
    assert json.loads(result.read_text())["r2med_provenance"]["instructions"] == recorded


def test_official_openai_without_a_key_is_refused_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SettingError) as refused:
        load_encoder("official:openai")
    assert refused.value.field == "api_key_env" and "needs an API key: set $OPENAI_API_KEY" in str(refused.value)
    assert "(or name another variable with --api-key-env), or give --base-url for" in refused.value.render("flag")
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(ValueError, match=r"needs an API key: set \$VOYAGE_API_KEY"):
        load_encoder("official:voyage")


def test_an_expanded_run_encodes_each_query_once_without_the_cache(mirror_env, tiny, monkeypatch):
    """With R2MED_NO_CACHE=1 (an API bills every text), the queries of an expanded run are encoded once."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import Dense

    monkeypatch.setenv("R2MED_NO_CACHE", "1")
    data = load_task(TASK, accept_drift=True)
    encoder = load_encoder(f"official:bge@{tiny['bert']}", show_progress=False)
    calls = []
    original = type(encoder.recipe).encode

    def counting(recipe, texts, kind, instruction, expansion=False):
        calls.append((kind, expansion, len(texts)))
        return original(recipe, texts, kind, instruction, expansion)

    monkeypatch.setattr(type(encoder.recipe), "encode", counting)
    Dense(encoder, expansion="hyde/gpt4").search(data, depth=5)
    queries = data.queries.height
    documents = data.corpus["text"].n_unique()  # each distinct text once (the fixture's Biology repeats one)
    assert sorted(calls) == sorted([("document", False, documents), ("query", False, queries), ("query", True, queries)])


def test_official_rerankers_refuse_a_missing_or_mismatched_head(tiny, tmp_path):
    from transformers import AutoTokenizer, BertForSequenceClassification

    from r2med_plugin.models.registry import load_reranker

    two = tmp_path / "two-labels"
    BertForSequenceClassification.from_pretrained(tiny["bert"], num_labels=2).save_pretrained(two)
    AutoTokenizer.from_pretrained(tiny["bert"]).save_pretrained(two)
    with pytest.raises(ValueError, match=r"one logit per pair.*has 2 labels.*official:monobert"):
        load_reranker(f"official:bge-reranker@{two}")
    with pytest.raises(ValueError, match=r"no trained classification head.*random weights"):
        load_reranker(f"official:monobert@{tiny['bert']}")  # a bare encoder: its head would be drawn at random


def test_a_plain_cross_encoder_without_a_trained_head_is_refused(tiny):
    """sentence-transformers would draw a random head for a bare encoder, and its scores would change from run to run."""
    from r2med_plugin.models.registry import load_reranker

    with pytest.raises(SettingError) as refused:
        load_reranker(str(tiny["bert"]))
    assert refused.value.field == "rerank" and "saved as BertModel, without a trained classification head" in str(refused.value)
    assert refused.value.render("flag").endswith("use the model as a first stage (--first-stage)")
