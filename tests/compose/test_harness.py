"""The compose harness's own recovery: a build that was killed or timed out midway leaves nothing
that a later run trusts or trips on (mounts in a chroot, processes still running, half-built
artifacts). No containers here: mounts and processes stand in for a killed debootstrap."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.compose import harness

pytestmark = [
    pytest.mark.compose,
    pytest.mark.skipif(
        not harness.sys.platform.startswith("linux") or os.geteuid() != 0,
        reason="mounts /proc like debootstrap does: needs root on Linux",
    ),
]


@pytest.fixture
def cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    started: list[subprocess.Popen] = []
    yield cache, started
    for proc in started:  # the harness should have ended them; never leave one behind
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    for point in sorted(harness._mounts_below(tmp_path), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def chroot_like(root):
    """What a debootstrap killed midway leaves: /proc and /dev/pts mounted in its rootfs."""
    for sub in ("proc", "dev/pts", "usr/bin"):
        (root / sub).mkdir(parents=True)
    (root / "usr/bin/dpkg").write_text("")
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(root / "dev/pts")], check=True)


def test_a_later_run_ends_unmounts_and_removes_what_a_killed_build_left(cache):
    cache, started = cache
    abandoned = cache / "building-rootfs-killed"
    chroot_like(abandoned / "rootfs")
    # A process of the dead run still working in its rootfs (dpkg in the chroot, say).
    started.append(
        subprocess.Popen(["sleep", "600"], cwd=abandoned / "rootfs", start_new_session=True)
    )
    legacy = cache / "tmpk1ll3d"  # what the harness's earlier TemporaryDirectory left
    chroot_like(legacy / "rootfs")
    complete = cache / "rootfs-bookworm-0123456789ab"
    complete.mkdir()
    (complete / "rootfs.tar").write_text("kept")
    (complete / "python-version").write_text("3.11.2\n")
    said: list[str] = []

    with harness._cache_lock(cache, harness.Deadline(60, "test")):
        harness._clear_abandoned(cache, said.append)

    assert harness._mounts_below(cache) == []
    assert started[0].wait(10) == -9
    assert sorted(p.name for p in cache.iterdir()) == [".lock", complete.name]
    assert (complete / "rootfs.tar").read_text() == "kept"
    assert any("1 processes ended, 2 mounts unmounted" in line for line in said), said


def test_a_build_that_fails_is_unmounted_and_removed_at_once(cache):
    cache, _ = cache
    with pytest.raises(RuntimeError, match="exited 3"), harness._building(cache, "rootfs") as work:
        chroot_like(work / "rootfs")
        harness._run(["sh", "-c", "exit 3"], None, 60, True, cwd=work / "rootfs")
    assert list(cache.iterdir()) == []
    assert harness._mounts_below(cache) == []


def test_a_command_past_its_timeout_ends_with_its_children(tmp_path):
    pid_file = tmp_path / "child"
    with pytest.raises(RuntimeError, match="did not finish within 1 s"):
        harness._run(["sh", "-c", f"sleep 600 & echo $! > {pid_file}; wait"], None, 1, True)
    child = int(pid_file.read_text())
    # Killed (the whole process group, not only `sh`): gone, or a zombie until init reaps it.
    # SIGKILL takes effect when the child is next scheduled: look for a few seconds at most.
    stat, deadline = Path(f"/proc/{child}/stat"), time.monotonic() + 10
    while not dead(stat) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dead(stat), stat.read_text()


def dead(stat: Path) -> bool:
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_the_build_deadline_bounds_each_command_and_then_stops_the_step():
    deadline = harness.Deadline(60, "the compose build step")
    assert deadline.left(5) == 5
    assert 59 < deadline.left() <= 60
    with pytest.raises(harness.BuildTimeout, match="not done within its deadline of 0 s"):
        harness.Deadline(0, "the compose build step").left(5)
