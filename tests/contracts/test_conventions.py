"""Conventions across the package: nothing of ours warns when the package is imported and its commands run; no
dataset loading script or remote code outside the one official recipe that needs it. A test of one unit lives with
that unit (the CLI's in tests/cli/, charts in tests/reporting/test_plots.py, the demo script in
tests/integrations/test_demo.py, --quiet in tests/toplevel/test_quiet.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import r2med_plugin

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_package_and_running_commands_warns_nothing_of_ours(mirror_env: Path, tmp_path: Path):
    code = (
        "import sys, r2med_plugin\n"
        "for name in r2med_plugin.__all__: getattr(r2med_plugin, name)\n"
        "from r2med_plugin.cli import main\n"
        f"out = {str(tmp_path / 'out')!r}\n"
        "codes = [main(['evaluate', '--task', 'NanoR2MEDBiology', '--retriever', 'bm25-lucene', '--hybrid', '--output', out, '--trec']),\n"
        "         main(['leaderboard', out]), main(['tasks', '--kind', 'nano'])]\n"
        "print(codes)\n"
    )
    # not --quiet, which ignores DeprecationWarnings; PYTHONWARNINGS also covers what the .pth autoload imports at start
    env = os.environ | {"PYTHONWARNINGS": "always::DeprecationWarning"}
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "[0, 0, 0]", out.stderr[-3000:]
    ours = [line for line in out.stderr.splitlines() if "DeprecationWarning" in line and "r2med_plugin" in line]
    assert ours == []


def test_no_loading_scripts_or_remote_code_in_the_package():
    package = Path(r2med_plugin.__file__).parent
    sources = "\n".join(p.read_text() for p in package.rglob("*.py"))
    assert "load_dataset(" not in sources
    # Remote code runs in one place only: NV-Embed-v2's own encode (official:nv), loaded as the official code and mteb load it.
    remote = {p.relative_to(package).as_posix(): p.read_text().count("trust_remote_code=True") for p in package.rglob("*.py")}
    assert {path: count for path, count in remote.items() if count} == {"models/official/recipes.py": 1}
    nv_recipe = (package / "models" / "official" / "recipes.py").read_text().split("class NVEmbedRecipe")[1].split("\nclass ")[0]
    assert "trust_remote_code=True" in nv_recipe
