"""The train/eval overlap audit (`r2med audit`, `r2med leaderboard --audit`).

A synthetic training set is built from the fixture mirror with planted cases at known rows: exact copies
(case, whitespace and NFKC changes), near-copies (words dropped, reordered or changed at known rates),
leaked query-positive pairs, a pair whose positive belongs to another query (not a leak), and a control set
of texts in the fixture's vocabulary that copy nothing. Expected hits come from an independent brute force:
plain Python sets of word n-grams, exact Jaccard against every evaluation text.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from r2med_plugin.audit.index import PAIR, QUERY, RELEVANT
from r2med_plugin.audit.minhash import MinHasher
from r2med_plugin.audit.report import read_audit
from r2med_plugin.audit.run import run_audit
from r2med_plugin.audit.text import jaccard, prepare, split_shingles
from r2med_plugin.audit.training import open_training
from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.data.loader import load_task
from tests.fixture_mirror import FILLER, TOPICS
from tests.support.builders import write_result

THRESHOLD = 0.5
NGRAM = 3
TASKS = ["R2MEDBiology", "NanoR2MEDBiology", "R2MEDMedQADiag", "NanoR2MEDPMCClinical"]


# --- the independent reference: Python sets of word n-grams -----------------------------------------------------------


def _grams(text: str, n: int = NGRAM) -> frozenset:
    words = re.findall(r"\w+", " ".join(unicodedata.normalize("NFKC", text).lower().split()))
    return frozenset([tuple(words)] if 0 < len(words) < n else (tuple(words[i:i + n]) for i in range(len(words) - n + 1)))


def _normal(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _brute_jaccard(left: frozenset, right: frozenset) -> float:
    return len(left & right) / len(left | right) if left | right else 0.0


def _evaluation_texts(mirror: Path, tasks: list[str]) -> list[tuple[str, str, str, str]]:
    """(task, kind, id, text) of every evaluated query and relevant document."""
    out = []
    for name in tasks:
        data = load_task(name, data_dir=mirror, accept_drift=True)
        documents = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
        queries = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
        out += [(name, QUERY, qid, text) for qid, text in queries.items()]
        relevant = sorted({d for q, judged in data.qrels.items() if q in queries for d, g in judged.items() if g > 0})
        out += [(name, RELEVANT, doc, documents[doc]) for doc in relevant]
    return out


def _expected_text_hits(rows: list[dict], evaluation: list[tuple[str, str, str, str]]) -> dict[tuple, float]:
    """(row, field, field_index, task, kind, eval id) -> similarity, by brute force over all pairs."""
    grams = [(task, kind, ident, _normal(text), _grams(text)) for task, kind, ident, text in evaluation]
    expected = {}
    for row in rows:
        for field, index, text in row["fields"]:
            mine, normal = _grams(text), _normal(text)
            for task, kind, ident, other_normal, other in grams:
                if not other_normal:
                    continue
                if normal == other_normal:
                    expected[(row["row"], field, index, task, kind, ident)] = 1.0
                elif len(normal.split()) >= NGRAM and len(other_normal.split()) >= NGRAM:
                    similarity = _brute_jaccard(mine, other)
                    if similarity >= THRESHOLD:
                        expected[(row["row"], field, index, task, kind, ident)] = similarity
    return expected


# --- planting ------------------------------------------------------------------------------------------------------------


def _edit(text: str, rng: random.Random, *, drop: float = 0.0, swap: float = 0.0, change: float = 0.0) -> str:
    """Words dropped, swapped with the next word or replaced by a word from outside the fixture vocabulary, each at
    its rate (the number of words touched is the rate times the length, rounded)."""
    words = text.split()
    for _ in range(round(change * len(words))):
        words[rng.randrange(len(words))] = f"changed{rng.randrange(10**6)}"
    for _ in range(round(swap * len(words))):
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    for _ in range(round(drop * len(words))):
        del words[rng.randrange(len(words))]
    return " ".join(words)


def _control_text(rng: random.Random) -> str:
    vocabulary = FILLER + [word for topic in TOPICS for word in topic]
    return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 30))) + "."


def _plant(mirror: Path) -> dict:
    """Training rows (anchor / positive / negative) with planted cases at known rows, and what each row holds."""
    rng = random.Random(34)
    biology = load_task("R2MEDBiology", data_dir=mirror, accept_drift=True)
    medqa = load_task("R2MEDMedQADiag", data_dir=mirror, accept_drift=True)
    nano = load_task("NanoR2MEDPMCClinical", data_dir=mirror, accept_drift=True)
    rows: list[dict] = [{"anchor": _control_text(rng), "positive": _control_text(rng), "negative": _control_text(rng)}
                        for _ in range(60)]
    planted: dict[str, list[int]] = {"exact": [], "near": [], "pair": [], "not_a_pair": [], "control": list(range(60))}

    def add(kind: str, row: dict) -> None:
        planted[kind].append(len(rows))
        rows.append(row)

    def documents(data):
        return dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))

    for data in (biology, medqa, nano):
        texts, queries = documents(data), dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
        first, second = list(data.qrels)[:2]
        query, positive = queries[first], texts[sorted(data.qrels[first])[0]]
        add("exact", {"anchor": query.upper(), "positive": _control_text(rng)})  # case
        add("exact", {"anchor": _control_text(rng), "positive": "  " + positive.replace(" ", " \t ") + "\n"})  # whitespace
        add("exact", {"anchor": queries[second].replace("fi", "\ufb01"), "positive": _control_text(rng)})  # NFKC: the fi ligature
        for rates in ({"drop": 0.05}, {"swap": 0.05}, {"change": 0.05}, {"drop": 0.1, "change": 0.05}, {"change": 0.3}):
            add("near", {"anchor": _edit(query, rng, **rates), "positive": _control_text(rng)})
        add("pair", {"anchor": query, "positive": positive, "negative": _control_text(rng)})  # exact pair
        add("pair", {"anchor": _edit(query, rng, swap=0.05), "positive": _edit(positive, rng, drop=0.05)})  # near pair
        other = texts[sorted(data.qrels[second])[0]]
        add("not_a_pair", {"anchor": query, "positive": other})  # the positive belongs to another query
    rows += [{"anchor": _control_text(rng), "positive": _control_text(rng)} for _ in range(40)]
    planted["control"] += list(range(len(rows) - 40, len(rows)))
    return {"rows": rows, "planted": planted}


def _as_training_rows(rows: list[dict]) -> list[dict]:
    """The rows as the reader gives them (anchor -> query, positive, negative)."""
    roles = (("query", "anchor"), ("positive", "positive"), ("negative", "negative"))
    return [{"row": i, "fields": [(role, 0, row[column]) for role, column in roles if column in row]} for i, row in enumerate(rows)]


@pytest.fixture(scope="module")
def planted(fixture_mirror: Path) -> dict:
    case = _plant(fixture_mirror)
    evaluation = _evaluation_texts(fixture_mirror, TASKS)
    case["expected"] = _expected_text_hits(_as_training_rows(case["rows"]), evaluation)
    return case


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _hits(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "hits.jsonl").read_text(encoding="utf-8").splitlines()]


def _audit(mirror_env: Path, train, out: Path, **kwargs) -> dict:
    return run_audit(train if isinstance(train, list) else [train], out=out, tasks=kwargs.pop("tasks", TASKS),
                     threshold=THRESHOLD, ngram=NGRAM, show_progress=False, **kwargs)


# --- what the audit finds --------------------------------------------------------------------------------------------


def test_planted_copies_near_copies_and_pairs_are_found_with_no_false_hit(mirror_env: Path, tmp_path: Path, planted: dict):
    summary = _audit(mirror_env, _write_jsonl(tmp_path / "train.jsonl", planted["rows"]), tmp_path / "out")
    hits = _hits(tmp_path / "out")
    found = {(h["row"], h["field"], h["field_index"], h["task"], h["kind"], h["eval_id"]): h["similarity"]
             for h in hits if h["kind"] != PAIR}
    assert found.keys() == planted["expected"].keys()  # every pair at or above the threshold, and nothing else
    for key, similarity in found.items():
        assert similarity == pytest.approx(planted["expected"][key], abs=1e-4)
    rows_hit = {h["row"] for h in hits}
    marks = planted["planted"]
    assert set(marks["exact"]) <= rows_hit and not rows_hit & set(marks["control"])
    exact = {h["row"] for h in hits if h["match"] == "exact" and h["kind"] != PAIR}
    assert set(marks["exact"]) <= exact
    near_expected = {key[0] for key, value in planted["expected"].items() if key[0] in marks["near"] and value < 1.0}
    assert len(near_expected) >= 9 and near_expected == {h["row"] for h in hits if h["row"] in marks["near"]}
    pairs = {h["row"] for h in hits if h["kind"] == PAIR}
    assert pairs == set(marks["pair"])  # every leaked pair; the other query's positive is no leak
    assert not pairs & set(marks["not_a_pair"])
    biology = summary["tasks"]["R2MEDBiology"]
    assert biology[PAIR]["hit"] == 1 and biology[PAIR]["total"] == 9 and biology[PAIR]["percent"] == pytest.approx(100 / 9, abs=0.01)
    assert summary["tasks"]["NanoR2MEDBiology"][QUERY]["hit"] == 0  # other texts: nothing planted there
    assert summary["training"][0]["rows"] == len(planted["rows"]) and summary["hits"] == len(hits)


def test_heavier_edits_fall_below_the_threshold(planted: dict):
    """The near-copies with 30% of their words changed are below 0.5 on word trigrams: found by neither side."""
    heavy = planted["planted"]["near"][4::5]
    assert heavy and not {key[0] for key in planted["expected"]} & set(heavy)


def test_lsh_recall_against_exact_all_pairs_jaccard_on_a_subsample(fixture_mirror: Path, planted: dict):
    """Every (training text, evaluation text) pair of a subsample with exact Jaccard >= the threshold is an LSH candidate."""
    from r2med_plugin.audit.index import build_index

    evaluation = _evaluation_texts(fixture_mirror, TASKS)
    index = build_index(evaluation, ngram=NGRAM, threshold=THRESHOLD)
    texts = [text for row in _as_training_rows(planted["rows"]) for _, _, text in row["fields"]]
    prepared = prepare(texts, NGRAM)
    sets = split_shingles(prepared)
    truth, caught = 0, 0
    for position, shingles in enumerate(sets):
        if prepared["words"][position] < NGRAM:
            continue
        signature = index.hasher.signatures(shingles, np.array([shingles.size]))[0]
        candidates = set(index.lsh.query(index.hasher.minhash(signature)))
        for entry, other in enumerate(index.sets):
            if len(index.normalized[entry].split()) >= NGRAM and jaccard(shingles, other) >= THRESHOLD:
                truth += 1
                caught += entry in candidates
    assert truth >= 20 and caught == truth  # recall 1.0 at this threshold on the planted data


def test_signatures_equal_datasketch_minhash():
    from datasketch import MinHash

    prepared = prepare(["the quick brown fox jumps over the lazy dog", "one two three four five six", "a b"], NGRAM)
    sets = split_shingles(prepared)
    signatures = MinHasher().signatures(np.concatenate(sets), np.array([s.size for s in sets]))
    for shingles, signature in zip(sets, signatures, strict=True):
        reference = MinHash(num_perm=128, seed=1, hashfunc=lambda value: int(value) & 0xFFFFFFFF)
        reference.update_batch(shingles.tolist())
        assert (reference.hashvalues == signature).all()


def test_shingles_are_word_ngrams_after_normalisation():
    prepared = prepare(["Insulin  and\tGLUCOSE, and insulin and glucose!", "insulin and glucose and insulin and glucose", "ﬁne"], NGRAM)
    first, second, third = split_shingles(prepared)
    assert prepared["normalized"][0] == "insulin and glucose, and insulin and glucose!" and prepared["normalized"][2] == "fine"
    assert first.size == 4 and jaccard(first, second) == 1.0  # insulin-and-glucose, and-glucose-and, glucose-and-insulin, and-insulin-and
    assert prepared["keys"][0] != prepared["keys"][1] and third.size == 1  # punctuation differs: no exact copy; 1 word: 1 shingle


# --- formats ---------------------------------------------------------------------------------------------------------


def _pairs_of(planted: dict, count: int = 2) -> list[dict]:
    return [planted["rows"][row] for row in planted["planted"]["pair"][:count]] + planted["rows"][:5]


def _write_format(kind: str, folder: Path, rows: list[dict]) -> tuple[Path, dict]:
    """The rows in one training format; returns the path and the arguments it needs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    if kind == "st-triplets":
        return _write_jsonl(folder / "t.jsonl", rows), {}
    if kind == "flagembedding-parquet":
        table = pa.table({"query": [r["anchor"] for r in rows], "pos": [[r["positive"]] for r in rows],
                          "neg": [[r.get("negative", "n"), "other negative"] for r in rows]})
        pq.write_table(table, folder / "t.parquet")
        return folder / "t.parquet", {}
    if kind == "st-pairs-gz":
        path = folder / "t.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.writelines(json.dumps({"sentence1": r["anchor"], "sentence2": r["positive"], "score": 1.0}) + "\n" for r in rows)
        return path, {}
    if kind == "custom-columns":
        return _write_jsonl(folder / "t.jsonl", [{"q": r["anchor"], "d": r["positive"]} for r in rows]), \
            {"columns": {"query": ["q"], "positive": ["d"]}}
    if kind == "negatives-numbered":
        return _write_jsonl(folder / "t.jsonl", [{"anchor": r["anchor"], "positive": r["positive"], "negative_1": "n",
                                                  "negative_2": r["positive"]} for r in rows]), {}
    if kind == "datasets":
        import datasets

        datasets.Dataset.from_dict({"query": [r["anchor"] for r in rows], "positive": [r["positive"] for r in rows]}).save_to_disk(str(folder / "ds"))
        return folder / "ds", {}
    if kind == "datasets-dict":
        import datasets

        split = datasets.Dataset.from_dict({"anchor": [r["anchor"] for r in rows], "positive": [r["positive"] for r in rows]})
        datasets.DatasetDict({"train": split, "dev": split.select([0])}).save_to_disk(str(folder / "dd"))
        return folder / "dd", {}
    if kind == "text":
        (folder / "t.txt").write_text("\n".join(r["anchor"].replace("\n", " ") for r in rows) + "\n\n", encoding="utf-8")
        return folder / "t.txt", {}
    if kind == "beir":
        beir = folder / "beir"
        beir.mkdir()
        _write_jsonl(beir / "queries.jsonl", [{"_id": f"q{i}", "text": r["anchor"]} for i, r in enumerate(rows)])
        _write_jsonl(beir / "corpus.jsonl", [{"_id": f"d{i}", "title": "", "text": r["positive"]} for i, r in enumerate(rows)])
        return beir, {}
    raise AssertionError(kind)


FORMATS = ["st-triplets", "flagembedding-parquet", "st-pairs-gz", "custom-columns", "negatives-numbered", "datasets",
           "datasets-dict", "text", "beir"]


@pytest.mark.parametrize("kind", FORMATS)
def test_every_input_format(mirror_env: Path, tmp_path: Path, planted: dict, kind: str):
    rows = _pairs_of(planted)
    path, extra = _write_format(kind, tmp_path / "in", rows)
    summary = _audit(mirror_env, path, tmp_path / "out", tasks=["R2MEDBiology", "R2MEDMedQADiag"], **extra)
    hits = _hits(tmp_path / "out")
    first = [h for h in hits if h["row"] == 0]
    assert {h["kind"] for h in first} >= ({QUERY} if kind == "text" else {QUERY, RELEVANT})
    pairs = {(h["task"], h["row"]) for h in hits if h["kind"] == PAIR}
    paired = kind not in ("text", "beir")  # one text a line, or queries and documents in separate files
    assert pairs == ({("R2MEDBiology", 0), ("R2MEDBiology", 1)} if paired else set())  # the exact and the near pair
    if kind == "negatives-numbered":  # the positive repeated as negative_2: found under that field
        assert {h["field"] for h in first if h["kind"] == RELEVANT} == {"positive", "negative"}
    if kind == "datasets-dict":
        assert [s["label"] for s in summary["training"]] == [f"{path}[train]", f"{path}[dev]"]
    if kind == "beir":
        assert {s["label"].rsplit("/", 1)[1] for s in summary["training"]} == {"corpus.jsonl", "queries.jsonl"}
        assert {h["id"] for h in hits if h["kind"] == QUERY} >= {"q0", "q1"}
    assert not [h for h in hits if h["row"] >= 2 and "[dev]" not in h["file"]]  # the control rows


def test_detected_layouts_are_named(tmp_path: Path):
    cases = {"a.jsonl": {"query": "q", "pos": ["p"], "neg": ["n"]}, "b.jsonl": {"anchor": "q", "positive": "p"},
             "c.jsonl": {"sentence1": "q", "sentence2": "p", "label": 1}, "d.jsonl": {"question": "q", "answer": "a"},
             "e.jsonl": {"text": "t"}, "queries.jsonl": {"_id": "1", "text": "t"}}
    layouts = {}
    for name, row in cases.items():
        source = open_training(_write_jsonl(tmp_path / name, [row]))[0]
        layouts[name] = (source.layout.split(" (")[0], dict(source.roles))
    assert layouts["a.jsonl"] == ("FlagEmbedding", {"query": ("query",), "positive": ("pos",), "negative": ("neg",)})
    assert layouts["b.jsonl"][1] == {"query": ("anchor",), "positive": ("positive",)}
    assert layouts["c.jsonl"][1] == {"query": ("sentence1",), "positive": ("sentence2",)}
    assert layouts["d.jsonl"][1] == {"query": ("question",), "positive": ("answer",)}
    assert layouts["e.jsonl"] == ("text", {"text": ("text",)})
    assert layouts["queries.jsonl"][1] == {"query": ("text",)}


# --- bad input -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "extra", "message"), [
    (None, [], "no such file or folder"),
    ("", [], "holds no rows (empty training set)"),
    ("\n\n", [], "holds no rows (empty training set)"),
    ('{"foo": "x", "bar": "y"}\n', [], "no known training layout in its columns ['foo', 'bar']"),
    ('{"foo": "x"}\n', ["--query-column", "q"], "no column 'q' (--query-column q); its columns are ['foo']"),
    ('{"anchor": "x", "positive": "y"}\nnot json\n', [], "line 2: malformed JSON"),
    ('{"anchor": "x", "positive": 3}\n', [], "line 1: column 'positive' holds int"),
    ('[{"anchor": "x"}]\n', [], "a JSON array, not JSON Lines"),
])
def test_bad_input_is_a_clear_error(mirror_env: Path, tmp_path: Path, capsys, content, extra, message):
    path = tmp_path / "train.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert main(["audit", str(path), "--task", "R2MEDBiology", "--out", str(tmp_path / "out"), "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("name", "message"), [("train.csv", "unsupported training file type '.csv'"),
                                               ("empty.parquet", "holds no rows"), ("folder", "neither saved by datasets"),
                                               ("lines.txt", "has no columns")])
def test_other_bad_inputs(mirror_env: Path, tmp_path: Path, capsys, name: str, message: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / name
    if name == "empty.parquet":
        pq.write_table(pa.table({"anchor": pa.array([], pa.string())}), path)
    elif name == "folder":
        path.mkdir()
    else:
        path.write_text("a,b\n", encoding="utf-8")
    extra = ["--text-column", "x"] if name == "lines.txt" else []
    assert main(["audit", str(path), "--task", "R2MEDBiology", "--out", str(tmp_path / "out"), "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err


def test_unknown_task_and_missing_data_say_what_to_do(mirror_env: Path, tmp_path: Path, capsys, monkeypatch):
    path = _write_jsonl(tmp_path / "t.jsonl", [{"text": "a b c"}])
    assert main(["audit", str(path), "--task", "R2MEDBiolgy", "--quiet"]) == 2
    assert "Did you mean 'R2MEDBiology'" in capsys.readouterr().err
    from r2med_plugin.integrations.demo import sample_dir

    monkeypatch.setenv("R2MED_DATA_DIR", str(sample_dir()))  # the demo sample holds the NanoR2MED tasks only
    assert main(["audit", str(path), "--task", "R2MEDBiology", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "--task nano" in capsys.readouterr().err


def test_the_demo_sample_is_audited(tmp_path: Path, monkeypatch, capsys):
    """The shipped sample (NanoR2MED only): one of its queries, planted, is found; the rest of the set is clean."""
    from r2med_plugin.integrations.demo import sample_dir

    monkeypatch.setenv("R2MED_DATA_DIR", str(sample_dir()))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    data = load_task("NanoR2MEDMedQADiag")
    query = data.queries["text"][0]
    path = _write_jsonl(tmp_path / "t.jsonl", [{"query": "unrelated words here only", "positive": "nothing"}, {"query": query, "positive": "x"}])
    assert main(["audit", str(path), "--task", "nano", "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "| NanoR2MEDMedQADiag | 1 / " in out and "wrote " in out
    assert {h["row"] for h in _hits(tmp_path / "out")} == {1}


# --- cleaned copies --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["st-triplets", "flagembedding-parquet", "st-pairs-gz", "datasets-dict", "text"])
def test_write_clean_drops_the_hit_rows_and_counts_them(mirror_env: Path, tmp_path: Path, planted: dict, kind: str):
    rows = _pairs_of(planted, count=2) + [planted["rows"][planted["planted"]["exact"][0]]]
    path, extra = _write_format(kind, tmp_path / "in", rows)
    summary = _audit(mirror_env, path, tmp_path / "out", tasks=["R2MEDBiology", "R2MEDMedQADiag"], write_clean_copy=True, **extra)
    for source in summary["training"]:
        clean = source["clean"]
        assert clean["rows"] == source["rows"] and clean["dropped"] == source["rows_hit"]
        assert clean["kept"] == clean["rows"] - clean["dropped"]
    first = summary["training"][0]["clean"]
    assert first["dropped"] == 3 and first["kept"] == 5  # 2 pairs and an exact copy dropped, 5 control rows kept
    cleaned = Path(first["path"]) if kind != "datasets-dict" else Path(first["path"]).parent
    again = _audit(mirror_env, cleaned, tmp_path / "again", tasks=["R2MEDBiology", "R2MEDMedQADiag"], **extra)
    assert again["hits"] == 0 and sum(s["rows"] for s in again["training"]) == sum(s["clean"]["kept"] for s in summary["training"])
    assert "cleaned copy" in (tmp_path / "out" / "report.md").read_text()


# --- the report and the leaderboard ----------------------------------------------------------------------------------


def test_leaderboard_audit_marks_the_overlapped_tasks(mirror_env: Path, tmp_path: Path, planted: dict, capsys):
    results = tmp_path / "results-folder"
    for spec in list_tasks("r2med"):
        write_result(results, "org/trained", spec.name, 0.4, spec.revision or "rev")
        write_result(results, "org/other", spec.name, 0.3, spec.revision or "rev")
    train = _write_jsonl(tmp_path / "t.jsonl", planted["rows"])
    assert main(["audit", str(train), "--task", "r2med", "--model", "org/trained", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    report = capsys.readouterr().out
    assert "| R2MEDBiology | " in report and "Declared training data of org/trained" in report
    assert read_audit(tmp_path / "a")["model"] == "org/trained"
    assert main(["leaderboard", str(results), "--audit", str(tmp_path / "a")]) == 0
    table = capsys.readouterr().out
    trained = next(line for line in table.splitlines() if "org/trained" in line and line.startswith("|"))
    other = next(line for line in table.splitlines() if "org/other" in line and line.startswith("|"))
    assert trained.count("40.00†") == 2 and "†" not in other  # Biology, MedQA-Diag (planted); the rest zero-shot
    assert "not zero-shot: training data overlaps 2 of 8 audited tasks" in trained
    note = next(line for line in table.splitlines() if line.startswith("- org/trained: audit"))
    assert "Biology: " in note and "pairs" in note
    assert main(["leaderboard", str(results), "--audit", f"org/other={tmp_path / 'a'}"]) == 0  # MODEL= overrides
    other = next(line for line in capsys.readouterr().out.splitlines() if "org/other" in line and line.startswith("|"))
    assert "†" in other
    assert main(["leaderboard", str(results), "--audit", f"org/nobody={tmp_path / 'a'}"]) == 2
    assert "no row of model 'org/nobody'" in capsys.readouterr().err
    assert main(["leaderboard", str(results), "--audit", str(tmp_path / "missing")]) == 2
    assert "run `r2med audit TRAIN --out" in capsys.readouterr().err


def test_an_audit_without_overlap_says_zero_shot(mirror_env: Path, tmp_path: Path, planted: dict, capsys):
    results = tmp_path / "r"
    for spec in list_tasks("nano"):
        write_result(results, "org/clean", spec.name, 0.5, spec.revision or "rev")
    train = _write_jsonl(tmp_path / "t.jsonl", planted["rows"][:20])
    assert main(["audit", str(train), "--task", "nano", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", str(results), "--audit", f"org/clean={tmp_path / 'a'}"]) == 0
    out = capsys.readouterr().out
    assert "zero-shot on the 8 audited tasks" in out and "†" not in out


def test_corpus_overlap_is_reported_apart(mirror_env: Path, tmp_path: Path, fixture_mirror: Path):
    data = load_task("R2MEDBiology", data_dir=fixture_mirror, accept_drift=True)
    relevant = {d for judged in data.qrels.values() for d in judged}
    other = next(i for i in data.corpus["id"].to_list() if i not in relevant and len(data.corpus.filter(data.corpus["id"] == i)["text"][0]) > 40)
    text = data.corpus.filter(data.corpus["id"] == other)["text"][0]
    train = _write_jsonl(tmp_path / "t.jsonl", [{"text": text}])
    plain = _audit(mirror_env, train, tmp_path / "plain", tasks=["R2MEDBiology"])
    assert plain["hits"] == 0  # not relevant to any query: no evaluation hit
    with_corpus = _audit(mirror_env, train, tmp_path / "corpus", tasks=["R2MEDBiology"], corpus=True)
    row = with_corpus["tasks"]["R2MEDBiology"]
    assert row["corpus_doc"]["hit"] >= 1 and row["corpus_doc"]["total"] == data.corpus.height and row[QUERY]["hit"] == 0
    assert "## Corpus overlap" in (tmp_path / "corpus" / "report.md").read_text()
    assert {h["kind"] for h in _hits(tmp_path / "corpus")} == {"corpus_doc"}


# --- mteb's declared training data -----------------------------------------------------------------------------------


def test_declared_training_data_names_r2med_sources(capsys):
    from r2med_plugin.integrations.mteb_training import declared_training_data

    diver = declared_training_data("AQ-MedAI/Diver-Retriever-0.6B")  # mteb declares BRIGHT's domains for it
    sources = {s["dataset"]: s for s in diver["r2med_sources"]}
    assert diver["known_to_mteb"] and sources["BrightBiologyRetrieval"]["relation"] == "same_data"
    assert sources["BrightBiologyRetrieval"]["tasks"] == ["R2MEDBiology", "NanoR2MEDBiology"] and sources["BrightBiologyRetrieval"]["url"]
    assert sources["BrightPonyRetrieval"]["relation"] == "related"
    minilm = declared_training_data("sentence-transformers/all-MiniLM-L6-v2")
    assert minilm["known_to_mteb"] and "MSMARCO" in minilm["training_datasets"] and minilm["r2med_sources"] == []
    assert declared_training_data("org/unknown-model")["known_to_mteb"] is False
    assert main(["audit", "--model", "AQ-MedAI/Diver-Retriever-0.6B"]) == 0
    out = capsys.readouterr().out
    assert "BrightBiologyRetrieval: BRIGHT (same_data" in out and "arXiv:2407.12883" in out
    assert main(["audit", "--model", "x/y", "--threshold", "0.7"]) == 2
    assert "--threshold reaches no code here" in capsys.readouterr().err


def test_source_mapping_entries_cite_their_sources():
    from r2med_plugin.audit.sources import match_sources, source_entries

    assert all(entry["citation"] and entry["url"].startswith("https://") for entry in source_entries())
    names = ["MedQA", "MedXpertQA", "PMC-Patients", "StackExchange", "R2MEDPMCClinicalRetrieval", "MSMARCO", "CMedQAv2"]
    found = {s["dataset"]: s["source"] for s in match_sources(names)}
    assert found == {"MedQA": "MedQA", "MedXpertQA": "MedXpertQA", "PMC-Patients": "PMC-Patients",
                     "StackExchange": "Stack Exchange", "R2MEDPMCClinicalRetrieval": "R2MED"}


def test_a_beir_folders_qrels_make_its_leaked_pairs(mirror_env: Path, tmp_path: Path, planted: dict):
    """A BEIR training folder keeps its queries and documents in two files; its qrels pair them. The planted exact
    and near pairs leak through qrels rows; a qrels row pairing a planted query with another row's document, or with
    a score of 0, does not."""
    rows = _pairs_of(planted)
    path, extra = _write_format("beir", tmp_path / "in", rows)
    (path / "qrels").mkdir()
    (path / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\nq0\td1\t0\nq1\td2\t1\n")
    _audit(mirror_env, path, tmp_path / "out", tasks=["R2MEDBiology", "R2MEDMedQADiag"], **extra)
    pairs = [h for h in _hits(tmp_path / "out") if h["kind"] == PAIR]
    assert {(h["task"], h["id"], h["training_doc_id"], h["qrels_line"]) for h in pairs} == {
        ("R2MEDBiology", "q0", "d0", 2), ("R2MEDBiology", "q1", "d1", 3)}
    assert all(h["field"] == "query+qrels" and h["file"].endswith("queries.jsonl") for h in pairs)
    (path / "qrels" / "train.tsv").write_text("q0\td0\tnot-a-number\n")
    with pytest.raises(ValueError, match=r"train.tsv, line 1: the score 'not-a-number' is not a number"):
        _audit(mirror_env, path, tmp_path / "out2", tasks=["R2MEDBiology"], **extra)
