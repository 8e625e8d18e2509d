"""Packages import one way only (DESIGN section 2): a new import that points back up, or a web
or queue framework in the engine, fails the build here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What each package may import of ours. `mini_n8n` (the command line) is on top: nobody imports it.
ALLOWED = {
    "core": set(),
    "memory": {"core"},
    "engine": {"core", "memory"},
    "worker": {"core", "engine", "memory"},
    "api": {"core", "engine", "memory", "worker"},
    "mini_n8n": {"core", "engine", "memory", "worker", "api"},
}
FRAMEWORKS = {"flask", "werkzeug", "gunicorn", "gevent", "celery", "kombu"}


def imports(package: str) -> dict[str, set[str]]:
    """Top-level module names each file of `package` imports (absolute imports)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_packages_import_only_the_packages_below_them():
    wrong = [
        f"{file} imports {name}"
        for package, allowed in ALLOWED.items()
        for file, names in imports(package).items()
        for name in sorted(names & set(ALLOWED) - allowed - {package})
    ]
    assert wrong == []


def test_the_engine_memory_and_core_use_no_web_or_queue_framework():
    wrong = [
        f"{file} imports {name}"
        for package in ("core", "memory", "engine")
        for file, names in imports(package).items()
        for name in sorted(names & FRAMEWORKS)
    ]
    assert wrong == []
