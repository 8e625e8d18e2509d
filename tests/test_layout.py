"""Packages import one way only (DESIGN section 2): a new import that points back up, a web or
queue framework in the engine, or I/O of its own in the engine, fails the build here. So does a
module or a function of the product grown past the size a reader can hold in mind."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What each package may import of ours. `mini_n8n` (the command line) is on top: nobody imports it.
ALLOWED = {
    "core": set(),
    "runtime": {"core"},
    "sandbox": {"core"},
    "memory": {"core"},
    "engine": {"core", "memory"},
    "models": {"core", "memory", "engine"},
    "worker": {"core", "runtime", "sandbox", "engine", "memory", "models"},
    "api": {"core", "runtime", "sandbox", "engine", "memory", "models", "worker"},
    "mini_n8n": {"core", "runtime", "sandbox", "engine", "memory", "models", "worker", "api"},
}
FRAMEWORKS = {"flask", "werkzeug", "gunicorn", "gevent", "celery", "kombu"}
# What does I/O or runs greenlets: the engine gets it lent (engine/services.py), never imports it.
IO_MODULES = {"socket", "ssl", "select", "httpx", "httpcore", "redis", "gevent"}


def imports(package: str, *, at_run_time: bool = False) -> dict[str, set[str]]:
    """Top-level module names each file of `package` imports (absolute imports); `at_run_time`:
    leaving out those under `if TYPE_CHECKING:`, which only a type checker reads."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        skipped = set()
        if at_run_time:
            skipped = {id(n) for block in _type_checking_blocks(tree) for n in ast.walk(block)}
        names: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def _type_checking_blocks(tree: ast.AST) -> list[ast.If]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name | ast.Attribute)
        and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
    ]


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


def test_the_engine_does_no_io_of_its_own():
    """Sockets, TLS, HTTP clients, Redis and gevent are lent to the engine (Services), so its
    own tests run without a network, a Redis or gevent. A type named under TYPE_CHECKING is no
    import at run time."""
    wrong = [
        f"{file} imports {name}"
        for file, names in imports("engine", at_run_time=True).items()
        for name in sorted(names & IO_MODULES)
    ]
    assert wrong == []


# A module a reader can hold in mind, a function that fits on a screen (STYLE.md, "Shape").
MODULE_LINES = 500
FUNCTION_LINES = 60


def sizes(package: str) -> tuple[dict[str, int], dict[str, int]]:
    """Lines of each module of `package`, and of each function (its decorators included)."""
    modules, functions = {}, {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = str(path.relative_to(ROOT))
        text = path.read_text()
        modules[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                end = node.end_lineno or node.lineno
                functions[f"{name}:{node.lineno} {node.name}"] = end - start + 1
    return modules, functions


def test_no_module_over_500_lines_no_function_over_60_lines_in_the_product_packages():
    too_long = []
    for package in ALLOWED:
        modules, functions = sizes(package)
        too_long += [f"{m}: {n} lines" for m, n in modules.items() if n > MODULE_LINES]
        too_long += [f"{f}: {n} lines" for f, n in functions.items() if n > FUNCTION_LINES]
    assert too_long == []
