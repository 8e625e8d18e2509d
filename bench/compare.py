"""Two commits side by side on this machine, in one run: bench/cpu_per_message.py for a git ref
(checked out into a temporary folder) and for this checkout, alternating, several rounds; then
the medians and the ratios this/ref. Ratios in one run, since the machine is shared and noisy.

    python bench/compare.py REF [ROUNDS] [SECONDS] [SESSIONS]

REF is any git ref (main, a commit). Each tree runs its own code with the packages its own
pyproject.toml asks for: this virtualenv's, or, when the ref's dependencies differ from this
checkout's, a virtualenv built for the ref in the temporary folder (a package added or dropped
is part of what is compared). Both are measured by this checkout's bench/cpu_per_message.py:
that script and bench/_common.py are copied into the ref's tree and run from there, since
_common.py puts its own tree first on the path, and the processes are started from that tree
(its tests/e2e/deployment.py). The bench prints the tree its processes ran from, and a round
whose code came from elsewhere stops the run.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
MEASURE = ("cpu_per_message.py", "_common.py")  # this checkout's measure, run inside each tree
# What the CPU bench prints, and the name each figure gets here.
FIGURES = {
    "messages/s": r"messages/s\s+([\d.]+)",
    "api CPU ms/msg": r"api CPU per message\s+([\d.]+)",
    "worker CPU ms/msg": r"worker CPU per message\s*([\d.]+)",
    "first item p50 ms": r"first item\s+p50 ([\d.]+)",
    "Redis commands/msg": r"Redis commands per message\s+([\d.]+)",
}


def checkout(ref: str, into: Path) -> Path:
    """The tree of `ref`, exported (no .git): what that commit would run."""
    archive = subprocess.run(
        ["git", "-C", str(HERE), "archive", "--format=tar", ref],
        check=True,
        capture_output=True,
    ).stdout
    tree = into / "ref"
    tree.mkdir()
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(tree, filter="data")
    return tree


def dependencies(tree: Path) -> list[str]:
    with open(tree / "pyproject.toml", "rb") as f:
        return sorted(tomllib.load(f)["project"]["dependencies"])


def python_for(tree: Path, into: Path) -> str:
    """This virtualenv's Python if `tree` asks for the packages this checkout does, else that of
    a virtualenv with the tree's own (its code still runs from the tree: PYTHONPATH)."""
    if dependencies(tree) == dependencies(HERE):
        return sys.executable
    venv = into / "venv"
    print(f"{tree.name}'s dependencies differ from this checkout's: a virtualenv of its own")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *dependencies(tree)], check=True)
    return str(venv / "bin" / "python")


def run(tree: Path, python: str, seconds: str, sessions: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for script in MEASURE:
        if tree != HERE:
            shutil.copy(HERE / "bench" / script, tree / "bench" / script)
    out = subprocess.run(
        [python, str(tree / "bench" / "cpu_per_message.py"), seconds, sessions],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"the bench failed in {tree}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    ran_from = re.search(r"code from (\S+)", out.stdout)
    if ran_from is None or Path(ran_from[1]) != tree:
        raise SystemExit(f"the bench for {tree} ran code from elsewhere:\n{out.stdout[-2000:]}")
    figures = {}
    for name, pattern in FIGURES.items():
        found = re.search(pattern, out.stdout)
        if found:
            figures[name] = float(found[1])
    return figures


def main(ref: str, rounds: int, seconds: str, sessions: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mini-n8n-compare-") as tmp:
        trees = {ref: checkout(ref, Path(tmp)), "this": HERE}
        pythons = {name: python_for(tree, Path(tmp)) for name, tree in trees.items()}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for i in range(rounds):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                figures = run(trees[name], pythons[name], seconds, sessions)
                results[name].append(figures)
                shown = "  ".join(f"{k} {v:g}" for k, v in figures.items())
                print(f"round {i + 1} {name:>8}: {shown}", flush=True)
        print(f"\nmedians of {rounds} rounds ({seconds} s, {sessions} sessions each)")
        print(f"{'':22}{ref:>12}{'this':>12}{'this/ref':>10}")
        for figure in FIGURES:
            values = {n: [r[figure] for r in results[n] if figure in r] for n in trees}
            if not all(values.values()):
                continue
            old, new = (statistics.median(values[n]) for n in trees)
            print(f"{figure:22}{old:12.2f}{new:12.2f}{new / old:10.2f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else 3,
        sys.argv[3] if len(sys.argv) > 3 else "20",
        sys.argv[4] if len(sys.argv) > 4 else "32",
    )
