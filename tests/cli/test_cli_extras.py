"""A lighter base install: `r2med --help` loads neither numpy nor polars, and a feature whose extra is not installed
(matplotlib: plots, demo; datasketch: audit) is refused with one line naming the extra, before any work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from r2med_plugin.optional_dependencies import MissingExtraError

HEAVY = ("numpy", "polars", "pyarrow", "scipy", "torch", "mteb")


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter (the one running the tests), offline."""
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def _cli_without(module: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`r2med <argv>` where ``module`` cannot be imported (set to None in sys.modules, as if not installed)."""
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from r2med_plugin.cli import main\n"
            f"sys.exit(main({argv!r}))")
    return _python(code, cwd)


def test_help_imports_neither_numpy_nor_polars(tmp_path):
    code = ("import sys\nfrom r2med_plugin.cli import main\n"
            "for argv in (['--help'], ['audit', '--help'], ['compare', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            f"print('LOADED', sorted({{name.split('.')[0] for name in sys.modules}} & set({HEAVY!r})))")
    run = _python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "usage: r2med" in run.stdout and "usage: r2med audit" in run.stdout and "usage: r2med compare" in run.stdout
    assert run.stdout.strip().splitlines()[-1] == "LOADED []"


def test_loader_choices_are_listed_and_checked_when_given(capsys):
    from r2med_plugin.cli import build_parser

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["evaluate", "--help"])  # the one help page that lists the loaders (and loads them)
    assert "--loader {auto,sentence-transformers,mteb,official,openai}" in capsys.readouterr().out
    args = parser.parse_args(["evaluate", "--task", "NanoR2MEDBiology", "--loader", "mteb"])
    assert args.loader == "mteb"
    with pytest.raises(SystemExit):
        parser.parse_args(["evaluate", "--task", "NanoR2MEDBiology", "--loader", "mtb"])
    assert ("argument --loader: invalid choice: 'mtb' (choose from 'auto', 'sentence-transformers', 'mteb', 'official', "
            "'openai')") in capsys.readouterr().err


def test_audit_without_datasketch_names_the_extra_before_any_work(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"query": "q", "positive": "p"}) + "\n")
    run = _cli_without("datasketch", ["audit", str(train), "--out", "audit-out", "--data-dir", "no-such-mirror"], tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == ("r2med: error: the train/eval overlap audit (r2med audit, r2med_plugin.audit.run.run_audit) "
                                  "needs datasketch, which the base install leaves out; install the 'audit' extra: "
                                  "pip install 'r2med-plugin[audit]'")
    assert not (tmp_path / "audit-out").exists()  # refused before the mirror or the training file was read


def test_audit_api_without_datasketch_raises_an_import_error(tmp_path):
    code = ("import sys; sys.modules['datasketch'] = None\n"
            "from r2med_plugin.audit.minhash import MinHasher\nfrom r2med_plugin.audit.run import run_audit\n"
            "for call in (lambda: run_audit(['train.jsonl'], out='out'), MinHasher):\n"
            "    try:\n        call()\n    except ImportError as error:\n"
            "        print(type(error).__name__, error.name, '|', error)\n")
    run = _python(code, tmp_path)
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0 and len(lines) == 2, run.stderr
    assert all(line.startswith("MissingExtraError datasketch | ") and line.endswith("pip install 'r2med-plugin[audit]'")
               for line in lines)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [
    ["leaderboard", "no-such-results", "--plot", "chart.png"],
    ["compare", "no-such-results", "--plot", "compare.svg"],
])
def test_plot_without_matplotlib_names_the_plots_extra_before_any_work(tmp_path, argv):
    run = _cli_without("matplotlib", argv, tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == ("r2med: error: drawing a chart (--plot, r2med demo, r2med_plugin.reporting.plots) needs "
                                  "matplotlib, which the base install leaves out; install the 'plots' extra: "
                                  "pip install 'r2med-plugin[plots]'")  # not an error about the missing results folder


def test_demo_without_matplotlib_names_the_demo_extra_before_any_work(tmp_path):
    run = _cli_without("matplotlib", ["demo", "--out", "demo-out", "--quiet"], tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().endswith("install the 'demo' extra: pip install 'r2med-plugin[demo]'")
    assert not (tmp_path / "demo-out").exists()


def test_plots_api_without_matplotlib_raises_an_import_error(tmp_path):
    code = ("import sys\n"
            "class Blocked:\n"  # an import hook that refuses matplotlib, as an environment without it would
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.partition('.')[0] == 'matplotlib':\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Blocked())\n"
            "from r2med_plugin.reporting.plots import pyplot, require_matplotlib\n"
            "for call in (pyplot, require_matplotlib):\n"
            "    try:\n        call()\n    except ImportError as error:\n        print(type(error).__name__, '|', error)\n")
    run = _python(code, tmp_path)
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0 and len(lines) == 2, run.stderr
    assert all(line.startswith("MissingExtraError | ") and line.endswith("pip install 'r2med-plugin[plots]'") for line in lines)


def test_present_extras_pass_the_check():
    from r2med_plugin.audit.minhash import require_datasketch
    from r2med_plugin.reporting.plots import require_matplotlib

    require_datasketch()
    require_matplotlib()
    assert issubclass(MissingExtraError, ImportError)


def test_base_dependencies_leave_the_optional_features_out():
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = {requirement.split(">")[0].split("[")[0] for requirement in project["dependencies"]}
    extras = {name: {requirement.split(">")[0] for requirement in group} for name, group in project["optional-dependencies"].items()}
    assert not base & {"matplotlib", "statsmodels", "datasketch", "nltk"}
    assert {"mteb", "ir_datasets", "faiss-cpu", "sentence-transformers", "polars", "bm25s", "PyStemmer"} <= base
    assert extras["plots"] == {"matplotlib"} and extras["audit"] == {"datasketch"} and "matplotlib" in extras["demo"]
    assert {"matplotlib", "datasketch", "statsmodels", "nltk"} <= extras["test"]


def test_demo_sample_dir_needs_no_extra_and_is_a_mirror_evaluate_reads(tmp_path):
    """What README's first example runs on a base install: the packaged sample's folder, then one evaluation on it."""
    run = _cli_without("matplotlib", ["demo", "--sample-dir"], tmp_path)
    assert run.returncode == 0, run.stderr
    sample = Path(run.stdout.strip())
    assert (sample / "hakari-bench" / "NanoR2MED" / "README.md").is_file()
    evaluated = _cli_without("matplotlib", ["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-hakari",
                                            "--data-dir", str(sample), "--quiet"], tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "synthetic-sample" in evaluated.stdout and "ndcg_at_10" in evaluated.stdout
