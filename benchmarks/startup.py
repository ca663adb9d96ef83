"""What the r2med-plugin autoload hook costs: `python -c pass` and `import mteb`, with the hook and without, side by side.

Builds the wheel and installs it (no dependencies) into a throwaway venv whose path file points at this environment's
packages (mteb and its dependencies, their .pth files not run), as tests/conftest.py's `fresh_python` does. Then:

1. `python -c pass` and `python -c "import mteb"`, alternately with `r2med_plugin_autoload.pth` present and moved away
   (the pair's order flips every pair, so drift hits both sides alike): wall time and the child's CPU time (user +
   system, from wait4: less sensitive than wall time to other work on the machine), median and spread;
2. the hook's own work inside one process (`import mteb` with the hook off, then the entry points it would run),
   wall and CPU time, median of several processes;
3. `python -X importtime -c "import mteb"` with the hook: our own modules, and every module imported only because of
   the hook (modules that `import mteb` imports anyway are not its cost).

    python benchmarks/startup.py [--pairs 20] [--pass-runs 40] [--hook-runs 10] [--source DIR]

`--source` builds the wheel from another checkout (`git archive <commit> | tar -x -C DIR`), to measure an earlier
version under the same conditions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PTH = "r2med_plugin_autoload.pth"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
HOOK_WORK = (
    "import time, mteb\n"
    "from r2med_plugin.integrations import _autoload\n"
    "wall, cpu = time.perf_counter(), time.process_time()\n"
    "_autoload.run_entry_points('mteb.tasks')\n"
    "print(time.perf_counter() - wall, time.process_time() - cpu)\n"
)
FOUND = (
    "import mteb\n"
    "ours = [t.metadata.name for t in mteb.get_tasks() if getattr(t, '__r2med_plugin__', False)]\n"
    "print(len(ours), len(mteb.get_benchmark('NanoR2MED').tasks), len(mteb.get_benchmark('R2MED-Full').tasks))\n"
)


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


@dataclass(frozen=True)
class Environment:
    python: Path
    site: Path
    parked: Path  # where the .pth file waits while the hook is off

    def hook(self, on: bool) -> None:
        source, target = (self.parked / PTH, self.site / PTH) if on else (self.site / PTH, self.parked / PTH)
        if source.exists():
            source.rename(target)


def _environ(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("R2MED_", "PYTHONPATH"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed wheel runs from its compiled files
    return {**env, **OFFLINE, **extra}


def _timed(python: Path, code: str, env: dict[str, str]) -> Timing:
    start = time.perf_counter()
    child = subprocess.Popen([str(python), "-c", code], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{python} -c {code!r} failed with exit code {child.returncode}")
    return Timing(wall, usage.ru_utime + usage.ru_stime)


def build_environment(root: Path, source: Path = REPO_ROOT) -> Environment:
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_host_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # mteb & co., without their .pth
    wheel = next(dist.glob("r2med_plugin-*.whl"))
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True)
    parked = root / "parked"
    parked.mkdir()
    return Environment(python, site, parked)


def side_by_side(environment: Environment, code: str, pairs: int) -> dict[bool, list[Timing]]:
    """``pairs`` alternating runs with and without the hook; the order within a pair flips every pair."""
    env = _environ()
    timings: dict[bool, list[Timing]] = {True: [], False: []}
    for _ in range(2):  # warm the file cache (and __pycache__) on both sides first
        for on in (True, False):
            environment.hook(on)
            _timed(environment.python, code, env)
    for pair in range(pairs):
        for on in ((True, False) if pair % 2 == 0 else (False, True)):
            environment.hook(on)
            timings[on].append(_timed(environment.python, code, env))
    environment.hook(True)
    return timings


def _spread(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"median {statistics.median(values) * 1000:.1f} ms (IQR {quartiles[0] * 1000:.1f}-{quartiles[2] * 1000:.1f})"


def report_side_by_side(label: str, timings: dict[bool, list[Timing]]) -> None:
    print(f"{label}, {len(timings[True])} alternating pairs:")
    for kind in ("wall", "cpu"):
        with_hook = [getattr(t, kind) for t in timings[True]]
        without = [getattr(t, kind) for t in timings[False]]
        differences = [a - b for a, b in zip(with_hook, without, strict=True)]
        ratio = statistics.median(with_hook) / statistics.median(without)
        print(f"  {kind:4}: with autoload {_spread(with_hook)}; without {_spread(without)}")
        print(f"        difference of medians {(statistics.median(with_hook) - statistics.median(without)) * 1000:+.1f} ms "
              f"(ratio {ratio:.3f}); per pair {_spread(differences)}")


def hook_work(environment: Environment, runs: int) -> list[Timing]:
    """The entry points' work after a plain `import mteb`, in ``runs`` fresh processes."""
    env = _environ(R2MED_PLUGIN_NO_AUTOLOAD="1")
    timings = []
    for _ in range(runs):
        out = subprocess.run([str(environment.python), "-c", HOOK_WORK], env=env, check=True, capture_output=True, text=True)
        wall, cpu = map(float, out.stdout.split()[-2:])
        timings.append(Timing(wall, cpu))
    return timings


def importtime(environment: Environment, hook_on: bool) -> dict[str, tuple[int, int]]:
    """module -> (self us, cumulative us) of `python -X importtime -c "import mteb"`."""
    environment.hook(hook_on)
    try:
        out = subprocess.run([str(environment.python), "-X", "importtime", "-c", "import mteb"], env=_environ(),
                             check=True, capture_output=True, text=True)
    finally:
        environment.hook(True)
    modules = {}
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
            modules[name.strip()] = (int(self_us), int(cumulative_us))
    return modules


def report_importtime(environment: Environment) -> None:
    with_hook, without = importtime(environment, True), importtime(environment, False)
    only_with = {name: times for name, times in with_hook.items() if name not in without}
    ours = {name: times for name, times in only_with.items() if name.startswith("r2med_plugin")}
    others = {name: times for name, times in only_with.items() if not name.startswith("r2med_plugin")}
    print(f"-X importtime of `import mteb` with the hook: {len(only_with)} modules that `import mteb` alone does not "
          f"import, {sum(s for s, _ in only_with.values()) / 1000:.1f} ms of their own time in all")
    for name, (self_us, cumulative_us) in sorted(ours.items(), key=lambda item: -item[1][0]):
        print(f"  {name:45} self {self_us / 1000:6.1f} ms   cumulative {cumulative_us / 1000:6.1f} ms")
    if others:
        print(f"  other modules: {', '.join(sorted(others))}")
    print("  (-X importtime times `import` statements only: the module an entry point names, loaded through importlib, "
          "is not listed; the hook's work above includes it)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20, help="alternating pairs of `import mteb` (default 20)")
    parser.add_argument("--pass-runs", type=int, default=40, help="alternating pairs of `python -c pass` (default 40)")
    parser.add_argument("--hook-runs", type=int, default=10, help="processes timing the hook's own work (default 10)")
    parser.add_argument("--source", type=Path, default=REPO_ROOT, help="the checkout to build the wheel from (default: this one)")
    args = parser.parse_args()
    print(f"load average before: {', '.join(f'{load:.2f}' for load in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        environment = build_environment(Path(tmp), args.source)
        print(f"wheel built from {args.source}")
        found = subprocess.run([str(environment.python), "-c", FOUND], env=_environ(), check=True, capture_output=True, text=True)
        tasks, nano, full = map(int, found.stdout.split()[-3:])
        print(f"with the hook, mteb.get_tasks() finds {tasks} r2med-plugin tasks; benchmarks NanoR2MED {nano}, R2MED-Full {full}")
        report_side_by_side("python -c pass", side_by_side(environment, "pass", args.pass_runs))
        report_side_by_side("import mteb", side_by_side(environment, "import mteb", args.pairs))
        work = hook_work(environment, args.hook_runs)
        print(f"the hook's work after `import mteb` (entry points: our register), {args.hook_runs} processes: "
              f"wall {_spread([t.wall for t in work])}; cpu {_spread([t.cpu for t in work])}")
        report_importtime(environment)
    print(f"load average after: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
