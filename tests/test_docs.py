"""Every command in README.md, CONTRIBUTING.md and docs/*.md runs as written.

A fenced block marked `sh` holds commands, one a line (a line ending in a backslash goes on, `#`
starts a comment); other blocks are output or configuration. A block that cannot run here says
why in a comment right before it, `<!-- not run: <why> -->`: it needs a container engine (the
compose deployment, which tests/compose runs), it is a server that runs until stopped, a
benchmark that loads the machine for minutes, or the test suite (or a part of it longer than a
command here may take).

The others run in order, file by file, with bash from a scratch checkout of this repository
(its files linked, `.venv` included) where `mini-n8n up` runs, as a user's second terminal would:
REDIS_URL unset, so the commands find that Redis through `.mini-n8n/state.json`. One thing is
changed: `localhost:5678` becomes the port this `up` listens on, as 5678 may be taken on a shared
machine.
"""

from __future__ import annotations

import re
import signal
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from mini_n8n.redis_server import free_port
from tests.e2e.deployment import ROOT
from tests.test_up import everything, start_up, stop_up, up_env

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->", re.S)
# What a scratch checkout leaves out: state of a run in the real checkout, and a workflows
# folder of the developer's, which `up` would import instead of the examples.
NOT_LINKED = {".git", ".mini-n8n", "workflows", ".pytest_cache", ".ruff_cache", ".mypy_cache"}


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    commands: list[str]
    not_run: str | None  # why not, when it is not run


def shell_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found, reason, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("<!--"):
            end = next(j for j in range(i, len(lines)) if "-->" in lines[j])
            marker = NOT_RUN.search("\n".join(lines[i : end + 1]))
            reason = marker.group(1) if marker else None
            i = end + 1
            continue
        if line.startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if line[3:].strip() == "sh":
                found.append(Block(path, i + 1, commands(lines[i + 1 : end]), reason))
            reason, i = None, end + 1
            continue
        if line.strip():
            reason = None  # a marker speaks of the block right after it
        i += 1
    return found


def commands(body: list[str]) -> list[str]:
    joined = re.sub(r"\\\n\s*", "", "\n".join(body))
    return [c.strip() for c in joined.splitlines() if c.strip() and not c.strip().startswith("#")]


def test_the_readme_starts_with_make_up_and_make_test():
    first = shell_blocks(ROOT / "README.md")[0]
    assert [c.split("#")[0].strip() for c in first.commands] == ["make up", "make test"]


def test_the_readme_is_a_page_of_at_most_300_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_every_block_that_is_not_run_says_why_and_the_others_are_many():
    blocks = [b for path in DOCS for b in shell_blocks(path)]
    assert all(b.not_run for b in blocks if b.not_run is not None)  # no empty reason
    runnable = [c for b in blocks if b.not_run is None for c in b.commands]
    assert len(runnable) >= 10, runnable


def test_no_user_page_tells_the_history_of_past_changes():
    for path in DOCS:
        text = path.read_text()
        assert not re.search(r"\b(before|after) issue \d+|issue \d+'s", text, re.I), path


def test_the_package_version_is_the_changelogs_newest_release():
    releases = re.findall(
        r"^## (\d+\.\d+\.\d+) \((\d{4}-\d\d-\d\d)\)", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    assert releases, "CHANGELOG.md names no release as '## X.Y.Z (YYYY-MM-DD)'"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == releases[0][0]
    dates = [date for _, date in releases]
    assert dates == sorted(dates, reverse=True)  # newest first


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A scratch checkout with `mini-n8n up` running in it: (folder, port)."""
    folder = tmp_path_factory.mktemp("checkout")
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (folder / entry.name).symlink_to(entry)
    port = free_port()
    up = start_up(folder, port)
    try:
        assert "mini-n8n is up." in everything(up)
        yield folder, port
        stop_up(up)
    finally:
        up.stop(signal.SIGKILL)


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_command_runs_as_written(checkout, path):
    folder, port = checkout
    for block in shell_blocks(path):
        if block.not_run is not None:
            continue
        for command in block.commands:
            ran = subprocess.run(
                [
                    "bash",
                    "-o",
                    "pipefail",
                    "-c",
                    command.replace("localhost:5678", f"localhost:{port}"),
                ],
                cwd=folder,
                env=up_env(free_port()),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                # A guard against a command that never returns, not a speed bound: `make lint`
                # (mypy over every package) takes minutes on a busy machine.
                timeout=600,
            )
            where = f"{path.name}:{block.line}: {command}"
            assert ran.returncode == 0, f"{where}\n{ran.stdout}\n{ran.stderr}"
