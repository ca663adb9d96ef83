from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.catalog import list_benchmarks, metadata_dir, spec_from_dict

OFFICIAL_DOMAINS = [
    "Biology", "Bioinformatics", "MedicalSciences", "MedXpertQAExam",
    "MedQADiag", "PMCTreatment", "PMCClinical", "IIYiClinical",
]


def test_sixteen_tasks_in_official_order():
    assert [s.name for s in r2med_plugin.list_tasks("r2med")] == [f"R2MED{d}" for d in OFFICIAL_DOMAINS]
    assert [s.name for s in r2med_plugin.list_tasks("nano")] == [f"NanoR2MED{d}" for d in OFFICIAL_DOMAINS]
    assert len(r2med_plugin.list_tasks()) == 16


def test_r2med_spec_fields():
    spec = r2med_plugin.get_task_spec("R2MEDBioinformatics")
    assert spec.kind == "r2med"
    assert spec.hub_repo == "R2MED/Bioinformatics"
    assert spec.revision == "6021fce366892cbfd7837fa85a4128ea93315e18"
    assert dict(spec.expected_counts) == {"queries": 77, "documents": 47473, "qrels": 227}
    assert spec.instruction == "Given a Bioinformatics post, retrieve relevant passages that help answer the post"
    assert spec.official_internal_name == "Stack-Bioinformatics"
    assert spec.mteb_builtin_task == "R2MEDBioinformaticsRetrieval"
    assert spec.configs["qrels"] == {"config": "qrels", "split": "qrels"}
    assert spec.gar_configs["hyde"][:2] == ("gpt4", "huatuo_o1_70b")
    assert spec.slug == "bioinformatics" and spec.hub_name == "Bioinformatics"
    assert spec.license == "cc-by-4.0" and "2505.14558" in spec.citation


def test_nano_spec_fields():
    spec = r2med_plugin.get_task_spec("NanoR2MEDMedQADiag")
    assert spec.hub_repo == "hakari-bench/NanoR2MED"
    assert spec.revision is None  # resolved at load time
    assert dict(spec.expected_counts) == {"queries": 118, "documents": 10000, "qrels": 522}
    assert spec.configs["corpus"] == {"config": "corpus", "split": "NanoR2MEDMedQADiag"}
    assert spec.candidate_configs["dense"]["config"] == "harrier_oss_v1_270m"
    hybrid = spec.candidate_profiles["hybrid"]
    assert hybrid["ndcg_at_10"] == 0.1405588095 and hybrid["rows_with_101_candidates"] == 34
    assert spec.hybrid_construction["seed"] == 20260524 and spec.hybrid_construction["rrf_k"] == 100
    assert spec.instruction == "Given a Medical Exam, retrieve relevant passages that help answer the exam"


def test_spec_is_frozen():
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.revision = "main"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.expected_counts["queries"] = 1  # type: ignore[index]


def test_unknown_name_suggests_the_closest():
    with pytest.raises(KeyError, match="Did you mean 'R2MEDBioinformatics'"):
        r2med_plugin.get_task_spec("R2MEDBioinformatic")
    with pytest.raises(KeyError, match="Did you mean 'NanoR2MEDPMCClinical'"):
        r2med_plugin.get_task_spec("nanor2medpmcclinical")


def test_bad_kind():
    with pytest.raises(ValueError, match="kind must be one of"):
        r2med_plugin.list_tasks("full")  # type: ignore[arg-type]


def test_unknown_and_missing_metadata_keys_are_errors():
    payload = json.loads((metadata_dir() / "R2MEDBiology.json").read_text())
    with pytest.raises(ValueError, match=r"unknown keys \['colour'\]"):
        spec_from_dict({**payload, "colour": "blue"}, "R2MEDBiology.json")
    payload.pop("revision")
    with pytest.raises(ValueError, match=r"missing keys \['revision'\]"):
        spec_from_dict(payload, "R2MEDBiology.json")


def test_benchmarks():
    benchmarks = list_benchmarks()
    assert benchmarks["NanoR2MED"] == [f"NanoR2MED{d}" for d in OFFICIAL_DOMAINS]
    assert benchmarks["R2MED-Full"] == [f"R2MED{d}" for d in OFFICIAL_DOMAINS]


def test_import_is_light():
    code = (
        "import sys, r2med_plugin; r2med_plugin.get_task_spec('R2MEDBiology'); "
        "print(','.join(m for m in ('torch', 'mteb', 'ir_datasets', 'polars') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_wheel_ships_task_metadata(built_wheel: Path):
    names = zipfile.ZipFile(built_wheel).namelist()
    shipped = sorted(n for n in names if n.startswith("r2med_plugin/task_metadata/"))
    assert len(shipped) == 18  # 16 tasks, benchmarks.json, leaderboard_expansions.json
    assert "r2med_plugin/task_metadata/NanoR2MEDBiology.json" in shipped
    assert "r2med_plugin/task_metadata/leaderboard_expansions.json" in shipped


def _clone_without_shared(root: Path) -> Path:
    """What the generator reads and checks, copied into ``root/clone`` (nothing beside it: no ../shared)."""
    repo = Path(__file__).resolve().parents[2]
    clone = root / "clone"
    for part in ("scripts", "reference", "task_metadata"):
        shutil.copytree(repo / part, clone / part)
    (clone / "r2med_plugin" / "reporting").mkdir(parents=True)
    shutil.copy(repo / "r2med_plugin" / "reporting" / "r2med_leaderboard.json", clone / "r2med_plugin" / "reporting")
    return clone


def test_task_metadata_check_passes_from_a_clone_with_only_the_repository(tmp_path: Path):
    clone = _clone_without_shared(tmp_path)
    check = [sys.executable, str(clone / "scripts" / "generate_task_metadata.py"), "--check"]
    result = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"checked 18 files in {clone / 'task_metadata'}"
    board = json.loads((clone / "reference" / "r2med_leaderboard.json").read_text(encoding="utf-8"))
    board["rows"][1]["avg"] = 0.0  # a fact changed in the one source: the packaged board is now stale
    (clone / "reference" / "r2med_leaderboard.json").write_text(json.dumps(board), encoding="utf-8")
    result = subprocess.run(check, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 1
    assert "r2med_plugin/reporting/r2med_leaderboard.json" in result.stderr


def test_every_reference_file_names_its_source():
    reference = Path(__file__).resolve().parents[2] / "reference"
    readme = (reference / "README.md").read_text(encoding="utf-8")
    files = sorted(path.name for path in reference.glob("*.json"))
    assert files == ["nanor2med_task_profiles.json", "r2med_catalog.json", "r2med_leaderboard.json", "r2med_real_files.json"]
    for name in files:
        assert json.loads((reference / name).read_text(encoding="utf-8"))["source"], name
        assert f"`{name}`" in readme, name


def test_ci_runs_the_task_metadata_check_unconditionally():
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ".venv/bin/python scripts/generate_task_metadata.py --check" in ci  # a line of its own, in no `if` block
    assert not any("shared/reference" in line for line in ci)


_BOARD_ROW = """<tr><td class="rank-cell"></td><td><a>{rewriter}</a></td><td><a href="https://x/r">{retriever}</a><br></td>
<td>{reranker}</td><td><strong>{avg}</strong></td>
{scores}</tr>"""


def test_the_board_extractor_copies_every_row_with_its_reranker(tmp_path: Path):
    """scripts/extract_published_board.py on a git clone of a board page: rows as published, "-" read as none."""
    rows = [("-", "E5-mistral-7b-instruct", '<a href="https://arxiv.org/abs/2508.07050">ReasonRank(32B)</a>', "42.85",
             ["45.56", "67.73", "63.45", "18.90", "30.60", "41.08", "46.11", "29.35"]),
            ("o3-mini", "BM25", "<a>-</a>", "41.01", ["59.65", "46.56", "47.17", "34.64", "55.22", "41.65", "35.32", "7.86"])]
    body = "".join(_BOARD_ROW.format(rewriter=w, retriever=r, reranker=k, avg=a,
                                     scores="".join(f"<td>{s}</td>" for s in scores)) for w, r, k, a, scores in rows)
    board = tmp_path / "board"
    board.mkdir()
    (board / "index.html").write_text(f"<table><thead></thead><tbody>{body}</tbody></table>", encoding="utf-8")
    git = ["git", "-C", str(board), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "index.html"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Update ReasonRank"], check=True)
    out = tmp_path / "board.json"
    script = Path(__file__).resolve().parents[2] / "scripts" / "extract_published_board.py"
    result = subprocess.run([sys.executable, str(script), str(board), "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    first, second = document["rows"]
    assert (first["llm"], first["retriever"], first["reranker"], first["avg"]) == (None, "E5-mistral-7b-instruct",
                                                                                  "ReasonRank(32B)", 42.85)
    assert first["scores"]["Biology"] == 45.56 and first["scores"]["IIYi-Clinical"] == 29.35
    assert (second["llm"], second["reranker"], second["scores"]["MedQA-Diag"]) == ("o3-mini", None, 55.22)
    assert document["reranker_papers"] == {"ReasonRank(32B)": "https://arxiv.org/abs/2508.07050"}
    assert '"Update ReasonRank"' in document["source"] and "https://" not in document["source"]
    # the repository's copy is this extractor's output at the board's commit c85a571: same keys, 68 rows
    reference = json.loads((script.parents[1] / "reference" / "r2med_leaderboard.json").read_text(encoding="utf-8"))
    assert list(reference) == list(document) and len(reference["rows"]) == 68 and "c85a571" in reference["source"]
