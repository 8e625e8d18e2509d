"""Runs the compose deployment for real on a machine with no Docker engine and no registry:
podman (rootful, its Docker-compatible socket), Debian's docker-compose 1.29, locally made images.

Everything specific to this kind of machine lives here, never in the Dockerfile or compose file:
- podman settings (a CONTAINERS_CONF with ulimits the sandbox allows and runc instead of crun);
- a storage root of its own per run, so each run starts from an empty image store and never
  touches other users' containers;
- base images from debootstrap (Python; redis-server from Debian) instead of python:3.x-slim
  and redis:7, and Python packages from wheels built on the host (HTTPS to PyPI fails inside
  containers here);
- healthchecks run by a thread: podman schedules them with systemd timers, and there is no
  systemd here, so without it `depends_on: condition: service_healthy` would wait forever.

The debootstrap tarball and the dependency wheels are cached between runs (not images: the image
store is empty at the start of every run).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
COMPOSE_FILES = (ROOT / "docker-compose.yml", HERE / "docker-compose.test.yml")
TOOLS = ("podman", "runc", "debootstrap", "docker-compose")
WORKDIR = Path(os.environ.get("MINI_N8N_COMPOSE_WORKDIR", "/var/tmp/mini-n8n-compose"))
# passwd: useradd for the image's non-root user; redis-server (with redis-cli) for the redis image.
BASE_PACKAGES = ("python3", "python3-venv", "passwd", "ca-certificates", "redis-server")
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
"""
CONTEXT_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".mini-n8n", "__pycache__", "*.pyc", "*.egg-info", ".pytest_cache",
    ".ruff_cache", "node_modules", "build", "dist", "wheels",
)  # fmt: skip
AARDVARK_DIR = Path("/run/containers/networks/aardvark-dns")
NICE = ["nice", "-n", "10"]  # the machine's two cores are shared with other test runs


class Unavailable(Exception):
    """No container engine here, and none can be installed: the tests skip with this reason."""


def unavailable_reason(tools: tuple[str, ...] = TOOLS) -> str | None:
    if not sys.platform.startswith("linux"):
        return "the compose tests need Linux (podman)"
    if _missing(tools):
        # Installs with apt when root; otherwise prints why it cannot.
        subprocess.run([str(ROOT / "scripts" / "ensure-podman")], check=False)
    missing = _missing(tools)
    if missing:
        return (
            f"no container engine: {', '.join(missing)} not installed and not installable "
            "here (scripts/ensure-podman needs root and apt-get)"
        )
    if "podman" in tools and os.geteuid() != 0:
        return "the compose tests run rootful podman and debootstrap: they need root"
    return None


def _missing(tools) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]


def compose_command(*args: str) -> list[str]:
    files = [arg for path in COMPOSE_FILES for arg in ("-f", str(path))]
    return ["docker-compose", *files, *args]


class Deployment:
    """One compose project on a private podman: engine, images, compose commands, teardown."""

    def __init__(self, run_dir: Path | None = None) -> None:
        """A new run, or (run_dir) an earlier one to clean up."""
        WORKDIR.mkdir(parents=True, exist_ok=True)
        self.cache = WORKDIR / "cache"
        self.cache.mkdir(exist_ok=True)
        if run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=WORKDIR))
            info = {"owner": os.getpid(), "project": f"mn8test{os.getpid()}", "port": _free_port()}
            (self.run_dir / "run.json").write_text(json.dumps(info))
        else:
            self.run_dir = run_dir
            info = json.loads((run_dir / "run.json").read_text())
        self.owner, self.project, self.port = info["owner"], info["project"], info["port"]
        self.socket = self.run_dir / "podman.sock"
        tag = _host_codename()
        self.base_image = f"localhost/mini-n8n-test-python:{tag}"
        self.redis_image = f"localhost/mini-n8n-test-redis:{tag}"
        self.env = self._environment()
        self._service: subprocess.Popen | None = None
        self._health: HealthChecks | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _environment(self) -> dict[str, str]:
        conf = self.run_dir / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        storage = self.run_dir / "storage.conf"
        storage.write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{self.run_dir / "storage"}"\n'
            f'runroot = "{self.run_dir / "runroot"}"\n'
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
        env.update(
            CONTAINERS_CONF=str(conf),
            CONTAINERS_STORAGE_CONF=str(storage),
            DOCKER_HOST=f"unix://{self.socket}",
            COMPOSE_PROJECT_NAME=self.project,
            COMPOSE_HTTP_TIMEOUT="300",
            PORT=str(self.port),
            MINI_N8N_IMAGE=f"localhost/{self.project}-mini-n8n:latest",
            MINI_N8N_TEST_CONTEXT=str(self.run_dir / "context"),
            MINI_N8N_TEST_BASE_IMAGE=self.base_image,
            MINI_N8N_TEST_REDIS_IMAGE=self.redis_image,
        )
        env.pop("MINI_N8N_API_KEY", None)
        return env

    # --- engine ---------------------------------------------------------------------------
    def start_engine(self, timeout: float = 30.0) -> None:
        log = open(self.run_dir / "podman-service.log", "wb")  # noqa: SIM115 (lives with the service)
        self._service = subprocess.Popen(
            [*NICE, "podman", "system", "service", "--time=0", f"unix://{self.socket}"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        (self.run_dir / "service.pid").write_text(str(self._service.pid))
        deadline = time.monotonic() + timeout
        while not _unix_socket_answers(self.socket):
            if self._service.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"podman system service did not start: see {log.name}")
            time.sleep(0.1)
        self._health = HealthChecks(self)
        self._health.start()

    def podman(self, *args: str, timeout: float = 60, check: bool = True, **kwargs):
        return _run(["podman", *args], self.env, timeout, check, **kwargs)

    def compose(self, *args: str, timeout: float = 120, check: bool = True, **kwargs):
        return _run(compose_command(*args), self.env, timeout, check, cwd=ROOT, **kwargs)

    def images(self) -> list[str]:
        out = self.podman("images", "--format", "{{.Repository}}:{{.Tag}}").stdout
        return [line for line in out.splitlines() if line.strip()]

    # --- images and build context -------------------------------------------------------
    def prepare_base_images(self) -> None:
        rootfs = base_rootfs(self.cache)
        for image, cmd in (
            (self.base_image, '["/bin/bash"]'),
            (self.redis_image, '["redis-server"]'),
        ):
            with open(rootfs, "rb") as tar:
                self.podman("import", "--change", f"CMD {cmd}", "-", image, stdin=tar, timeout=180)

    def prepare_context(self) -> None:
        """The repository as a build context, plus wheels/ for `pip install --no-index`."""
        context = self.run_dir / "context"
        shutil.copytree(ROOT, context, ignore=CONTEXT_IGNORE)
        wheels = dependency_wheels(self.cache, image_python_version(self.cache))
        shutil.copytree(wheels, context / "wheels", copy_function=os.link)

    # --- teardown -------------------------------------------------------------------------
    def close(self) -> None:
        """Best effort, step by step: one failing step must not leave the rest behind."""
        steps = [
            lambda: (
                _unix_socket_answers(self.socket)
                and self.compose("down", "-v", "--timeout", "5", timeout=120, check=False)
            ),
            lambda: self._health and self._health.stop(),
            lambda: self.podman("rm", "--all", "--force", "--time", "0", timeout=120, check=False),
            lambda: self.podman("rmi", "--all", "--force", timeout=120, check=False),
            self._stop_engine,
            lambda: self.podman("network", "rm", "--force", f"{self.project}_default", check=False),
            lambda: _forget_dns(f"{self.project}_default"),
            lambda: _unmount_below(self.run_dir),
            lambda: shutil.rmtree(self.run_dir),
        ]
        for step in steps:
            try:
                step()
            except Exception as err:  # report and go on: teardown must reach the end
                print(f"compose harness teardown: {err}", file=sys.stderr)

    def _stop_engine(self) -> None:
        pid_file = self.run_dir / "service.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text())
        if self._service is not None:
            self._service.terminate()
            try:
                self._service.wait(30)
            except subprocess.TimeoutExpired:
                self._service.kill()
                self._service.wait()
        elif _alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    @classmethod
    def clean_stale_runs(cls) -> None:
        """Remove what runs that crashed or were killed left behind (their owner is gone)."""
        for run_dir in WORKDIR.glob("run-*"):
            try:
                stale = cls(run_dir)
            except (OSError, ValueError, KeyError):
                _unmount_below(run_dir)
                shutil.rmtree(run_dir, ignore_errors=True)
                continue
            if not _alive(stale.owner):
                stale.close()


class HealthChecks(threading.Thread):
    """Runs the containers' healthchecks, which podman leaves to systemd timers (none here):
    every second until a container is healthy, then every ten seconds."""

    def __init__(self, deployment: Deployment):
        super().__init__(daemon=True, name="podman-healthchecks")
        self.deployment = deployment
        self._halt = threading.Event()
        self._last: dict[str, float] = {}

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def run(self) -> None:
        d = self.deployment
        label = f"label=com.docker.compose.project={d.project}"
        while not self._halt.wait(1.0):
            listing = d.podman(
                "ps", "--filter", label, "--format", "{{.ID}} {{.Status}}", check=False
            )
            for line in listing.stdout.splitlines():
                container, _, status = line.partition(" ")
                every = 10.0 if "(healthy)" in status else 1.0
                if time.monotonic() - self._last.get(container, 0.0) >= every:
                    self._last[container] = time.monotonic()
                    d.podman("healthcheck", "run", container, check=False, timeout=30)


def base_rootfs(cache: Path) -> Path:
    """A minimal Debian of the host's release with Python and redis-server, as a tarball."""
    codename = _host_codename()
    key = hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:12]
    tarball = cache / f"rootfs-{codename}-{key}.tar"
    if tarball.exists():
        return tarball
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(
            [*NICE, "debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
             codename, str(rootfs), _apt_mirror(codename)],
            None, 900, True,
        )  # fmt: skip
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / junk).glob("*"):
                if path.is_file():
                    path.unlink()
        version = _run(
            ["chroot", str(rootfs), "python3", "-c", "import platform; print(platform.python_version())"],
            None, 60, True,
        ).stdout.strip()  # fmt: skip
        tarball.with_suffix(".python").write_text(version)
        partial = tarball.with_suffix(".partial")
        _run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], None, 300, True)
        partial.rename(tarball)
    return tarball


def image_python_version(cache: Path) -> str:
    return base_rootfs(cache).with_suffix(".python").read_text().strip()


def dependency_wheels(cache: Path, python_version: str) -> Path:
    """Wheels of the project's dependencies and build backend for the image's Python (which is
    not necessarily the Python running the tests), downloaded on the host."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = [*pyproject["project"]["dependencies"], *pyproject["build-system"]["requires"]]
    key = hashlib.sha256(" ".join([python_version, *requirements]).encode()).hexdigest()[:12]
    wheels = cache / f"wheels-{python_version}-{key}"
    if wheels.exists():
        return wheels
    partial = cache / f"{wheels.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _run(
        [*NICE, *_pip_download(python_version), "--quiet", "--disable-pip-version-check",
         "--only-binary=:all:", "--dest", str(partial), *requirements, "wheel"],
        None, 600, True,
    )  # fmt: skip
    partial.rename(wheels)
    return wheels


def _pip_download(python_version: str) -> list[str]:
    """`pip download` run by an interpreter of exactly the image's version, so dependency markers such as
    `python_full_version < "3.11.3"` resolve as they will in the image. The host's own Debian
    Python is one (the image is the host's release); otherwise pip is told the target version,
    which covers wheel tags and Requires-Python but not markers."""
    probe = "import platform; print(platform.python_version())"
    for python in (sys.executable, "/usr/bin/python3"):
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
        if found.stdout.strip() == python_version:
            has_pip = subprocess.run([python, "-m", "pip", "--version"], capture_output=True)
            if has_pip.returncode == 0:
                return [python, "-m", "pip", "download"]
    return [sys.executable, "-m", "pip", "download", "--python-version", python_version]


def _apt_mirror(codename: str) -> str:
    """The host's own Debian mirror for its release, from apt's configuration."""
    out = _run(
        ["apt-get", "indextargets", "--format", "$(REPO_URI) $(RELEASE)", "Identifier: Packages"],
        None, 30, True,
    ).stdout  # fmt: skip
    for line in out.splitlines():
        uri, _, release = line.partition(" ")
        if release.strip() == codename:
            return uri
    raise RuntimeError(f"apt has no mirror for {codename}")


def _host_codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("cannot tell the host's Debian release from /etc/os-release")


def _run(cmd, env, timeout, check, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    result = subprocess.run(cmd, env=env, timeout=timeout, text=True, **kwargs)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


def _unmount_below(path: Path) -> None:
    """Storage mounts podman left (a failed build's container, the overlay bind mount)."""
    prefix = str(path) + "/"
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")  # octal escapes: \040 ...
        if point.startswith(prefix):
            mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def _forget_dns(network: str) -> None:
    """Drop aardvark-dns's records of a network whose containers were never torn down (a run
    killed midway). Left there, a later network on the same subnet resolves `redis` to a dead
    address."""
    records = AARDVARK_DIR / network
    if records.exists():
        records.unlink()
        pid_file = AARDVARK_DIR / "aardvark.pid"
        pid = int(pid_file.read_text().strip() or 0) if pid_file.exists() else 0
        if pid > 0 and _alive(pid):
            os.kill(pid, signal.SIGHUP)  # reload its records


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unix_socket_answers(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
