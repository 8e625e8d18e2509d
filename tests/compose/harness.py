"""Runs the compose deployment for real on a machine with no Docker engine and no registry:
podman (rootful, its Docker-compatible socket), Debian's docker-compose 1.29, locally made images.

Everything specific to this kind of machine lives here, never in the Dockerfile or compose file:
- podman settings (a CONTAINERS_CONF with ulimits the sandbox allows and runc instead of crun);
- a storage root of its own per run, so each run starts from an empty image store and never
  touches other users' containers;
- one base image from debootstrap (Python, and Debian's redis-server, nginx and rabbitmq-server)
  instead of python:3.x-slim, redis, nginx and rabbitmq, and Python packages from wheels built on
  the host (HTTPS to PyPI fails inside containers here);
- a generated api key and Redis password, as the secret files docs/deploy.md makes, the user's
  workflows folder (empty at first) and an empty env file in place of a `.env` of the checkout,
  so the caller's settings never reach the deployment;
- healthchecks run by a thread: podman schedules them with systemd timers, and there is no
  systemd here, so without it `depends_on: condition: service_healthy` would wait forever.

The debootstrap tarball and the dependency wheels are cached between runs (not images: the image
store is empty at the start of every run). Each cached artifact is built in a `building-*` folder
of the cache, under an exclusive lock, and renamed into place only when complete: a run that is
killed midway (even during debootstrap, with /proc mounted in its chroot) leaves no artifact a
later run would trust, and the next run that takes the lock ends what still runs there, unmounts
what is mounted there and removes it.

Building (cache, engine, base images, `docker-compose build`) is one step with a deadline of its
own (BUILD_SECONDS): the compose tests' conftest runs it before the first test, outside every
test's timeout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
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
# The RabbitMQ variant: the product's override and its test override, given after those above.
RABBITMQ_FILES = (ROOT / "docker-compose.rabbitmq.yml", HERE / "docker-compose.rabbitmq.test.yml")
# TLS at the proxy (docs/tls.md): the product's override, as it is.
TLS_FILES = (ROOT / "docker-compose.tls.yml",)
TOOLS = ("podman", "runc", "debootstrap", "docker-compose", "catatonit")
WORKDIR = Path(os.environ.get("MINI_N8N_COMPOSE_WORKDIR", "/var/tmp/mini-n8n-compose"))
CACHE = WORKDIR / "cache"
# The whole build step: a cold cache (debootstrap, wheels) on a busy machine plus the images.
BUILD_SECONDS = float(os.environ.get("MINI_N8N_COMPOSE_BUILD_SECONDS", "900"))
# passwd: useradd for the image's non-root user; redis-server (with redis-cli) for the redis image;
# nginx and curl (its healthcheck) for the proxy image, which the official nginx image has too;
# rabbitmq-server for the rabbitmq image of the RabbitMQ variant (docker-compose.rabbitmq.yml).
BASE_PACKAGES = (
    "python3", "python3-venv", "passwd", "ca-certificates", "redis-server", "nginx", "curl",
    "rabbitmq-server",
)  # fmt: skip
# What the compose file reads from the environment: a test sets what it needs, never the caller's
# shell (an OPENAI_API_KEY there would reach the containers).
PRODUCT_VARIABLES = (
    "MINI_N8N_API_KEY_SECRET", "REDIS_PASSWORD_SECRET", "MINI_N8N_API_KEY", "REDIS_PASSWORD",
    "MINI_N8N_DEMO", "MINI_N8N_WORKFLOWS", "MINI_N8N_CREDENTIALS_SECRET", "PUBLISH_ADDRESS",
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "MINI_N8N_LOG_LEVEL", "MINI_N8N_LOG_FORMAT",
    "REDIS_IMAGE", "PROXY_IMAGE", "RABBITMQ_USER", "RABBITMQ_PASSWORD", "RABBITMQ_IMAGE",
    "MINI_N8N_PROXY_METRICS", "TLS_CERTIFICATE", "TLS_KEY",
)  # fmt: skip
# The official redis image's /data belongs to its `redis` user, so a named volume mounted there
# does too: the stand-in image gets the same (Debian's package keeps its data elsewhere).
REDIS_CONTAINERFILE = "FROM {base}\nRUN mkdir -p /data && chown redis:redis /data\n"
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
# The machine's two cores are shared with other test runs: the cache's builds run niced. The
# podman engine does not, since its containers inherit its niceness: a deployment starved below
# the machine's other work would measure the machine, not the product (a worker whose lease
# thread cannot run for the lease's 2 s is declared lost).
NICE = ["nice", "-n", "10"]


class Unavailable(Exception):
    """No container engine here, and none can be installed: the tests skip with this reason."""


class BuildTimeout(Exception):
    """The build step ran out of its deadline."""


class Deadline:
    """One bound for a whole step; each command in it gets what is left (or less)."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds, self.what = seconds, what
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise BuildTimeout(f"{self.what}: not done within its deadline of {self.seconds:.0f} s")
        return left if cap is None else min(cap, left)


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


def compose_command(
    *args: str, env_file: Path | None = None, files: tuple[Path, ...] = COMPOSE_FILES
) -> list[str]:
    """docker-compose with the product's compose file and the test override (`files`: those and
    a variant's); `env_file` stands in for a .env in the repository (a developer's own settings)."""
    files = [arg for path in files for arg in ("-f", str(path))]
    env = ["--env-file", str(env_file)] if env_file is not None else []
    return ["docker-compose", *files, *env, *args]


def build_deployment(seconds: float = BUILD_SECONDS, say=print) -> Deployment:
    """The build step: cached base rootfs and wheels (made when missing), then a new deployment
    with its engine started, base images imported, context staged and `docker-compose build`
    done; all of it within `seconds`. `say` gets a line per stage, with its time."""
    deadline = Deadline(seconds, "the compose build step")
    Deployment.clean_stale_runs()
    rootfs, wheels = prepare_cache(CACHE, deadline, say)
    d = Deployment()
    try:
        d.build(rootfs, wheels, deadline, say)
    except BaseException:
        d.close()
        raise
    return d


def _stage(say, what: str):
    """A context that reports how long `what` took."""

    @contextlib.contextmanager
    def timed():
        started = time.monotonic()
        yield
        say(f"{what}: {time.monotonic() - started:.1f} s")

    return timed()


class Deployment:
    """One compose project on a private podman: engine, images, compose commands, teardown."""

    def __init__(self, run_dir: Path | None = None) -> None:
        """A new run, or (run_dir) an earlier one to clean up."""
        WORKDIR.mkdir(parents=True, exist_ok=True)
        self.cache = CACHE
        self.cache.mkdir(exist_ok=True)
        if run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=WORKDIR))
            info = {
                "owner": os.getpid(),
                "project": f"mn8test{os.getpid()}",
                "port": _free_port(),
                "api_key": secrets.token_hex(24),
                "redis_password": secrets.token_hex(24),
            }
            (self.run_dir / "run.json").write_text(json.dumps(info))
        else:
            self.run_dir = run_dir
            info = json.loads((run_dir / "run.json").read_text())
        self.owner, self.project, self.port = info["owner"], info["project"], info["port"]
        self.api_key: str = info.get("api_key", "")
        self.redis_password: str = info.get("redis_password", "")
        # "https" once a test put the proxy on TLS (docker-compose.tls.yml), and then the path
        # of the certificate its clients trust (httpx's `verify`).
        self.scheme = "http"
        self.verify: ssl.SSLContext | bool = True
        # The user's workflows folder (MINI_N8N_WORKFLOWS), mounted into the api: empty at first.
        self.workflows = self.run_dir / "workflows"
        self.workflows.mkdir(exist_ok=True)
        self.env_file = self.run_dir / "empty.env"
        self.env_file.touch()
        self.socket = self.run_dir / "podman.sock"
        tag = _host_codename()
        self.base_image = f"localhost/mini-n8n-test-python:{tag}"
        self.redis_image = f"localhost/mini-n8n-test-redis:{tag}"
        self.proxy_image = f"localhost/mini-n8n-test-nginx:{tag}"
        self.rabbitmq_image = f"localhost/mini-n8n-test-rabbitmq:{tag}"
        # What every compose command of this deployment is given (a test may add a variant's).
        self.compose_files = COMPOSE_FILES
        self.app_image = f"localhost/{self.project}-mini-n8n:latest"
        self.env = self._environment()
        self.started: float | None = None  # when the engine was started (build step)
        self.images_before_build: list[str] | None = None
        self._service: subprocess.Popen | None = None
        self._health: HealthChecks | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

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
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DOCKER_", "COMPOSE_")) and k not in PRODUCT_VARIABLES
        }
        env.update(
            CONTAINERS_CONF=str(conf),
            CONTAINERS_STORAGE_CONF=str(storage),
            DOCKER_HOST=f"unix://{self.socket}",
            COMPOSE_PROJECT_NAME=self.project,
            COMPOSE_HTTP_TIMEOUT="300",
            PORT=str(self.port),
            MINI_N8N_IMAGE=self.app_image,
            MINI_N8N_TEST_CONTEXT=str(self.run_dir / "context"),
            MINI_N8N_TEST_BASE_IMAGE=self.base_image,
            MINI_N8N_TEST_REDIS_IMAGE=self.redis_image,
            MINI_N8N_TEST_PROXY_IMAGE=self.proxy_image,
            MINI_N8N_TEST_RABBITMQ_IMAGE=self.rabbitmq_image,
            MINI_N8N_API_KEY_SECRET=self._secret_file("api_key", self.api_key),
            REDIS_PASSWORD_SECRET=self._secret_file("redis_password", self.redis_password),
            MINI_N8N_WORKFLOWS=str(self.workflows),
        )
        return env

    def _secret_file(self, name: str, value: str) -> str:
        """A secret as docs/deploy.md makes it: one line in a file the containers' users read
        (in a folder only its owner enters)."""
        folder = self.run_dir / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / name
        path.write_text(value + "\n")
        path.chmod(0o644)
        return str(path)

    # --- build --------------------------------------------------------------------------
    def build(self, rootfs: Path, wheels: Path, deadline: Deadline, say=print) -> None:
        """From an empty image store to built images, within the deadline."""
        self.started = time.monotonic()
        with _stage(say, "podman engine started"):
            self.start_engine(timeout=deadline.left(60))
        self.images_before_build = self.images()
        with _stage(say, "base images imported"):
            self.prepare_base_images(rootfs, deadline)
        with _stage(say, "build context staged"):
            self.prepare_context(wheels)
        with _stage(say, "docker-compose build"):
            self.compose("build", timeout=deadline.left())

    # --- engine ---------------------------------------------------------------------------
    def start_engine(self, timeout: float = 60.0) -> None:
        log = open(self.run_dir / "podman-service.log", "wb")  # noqa: SIM115 (lives with the service)
        self._service = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{self.socket}"],
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

    def compose(
        self, *args: str, timeout: float = 120, check: bool = True, env=None, **kwargs
    ) -> subprocess.CompletedProcess:
        """docker-compose in this deployment's environment (`env`: another one)."""
        command = compose_command(*args, env_file=self.env_file, files=self.compose_files)
        return _run(command, self.env if env is None else env, timeout, check, cwd=ROOT, **kwargs)

    def images(self) -> list[str]:
        out = self.podman("images", "--format", "{{.Repository}}:{{.Tag}}").stdout
        return [line for line in out.splitlines() if line.strip()]

    # --- images and build context -------------------------------------------------------
    def prepare_base_images(self, rootfs: Path, deadline: Deadline) -> None:
        """One Debian image under four names: the compose files give redis, the proxy and rabbitmq
        their commands, so they need no image of their own; redis' gets its /data, as the
        official image has it."""
        with open(rootfs / "rootfs.tar", "rb") as tar:
            self.podman(
                "import", "--change", 'CMD ["/bin/bash"]', "-", self.base_image,
                stdin=tar, timeout=deadline.left(300),
            )  # fmt: skip
        for image in (self.proxy_image, self.rabbitmq_image):
            self.podman("tag", self.base_image, image, timeout=deadline.left(60))
        context = self.run_dir / "redis-image"
        context.mkdir(exist_ok=True)
        (context / "Containerfile").write_text(REDIS_CONTAINERFILE.format(base=self.base_image))
        self.podman(
            "build", "--pull=never", "-t", self.redis_image, str(context),
            timeout=deadline.left(300),
        )  # fmt: skip

    def prepare_context(self, wheels: Path) -> None:
        """The repository as a build context, plus wheels/ for `pip install --no-index`."""
        context = self.run_dir / "context"
        shutil.copytree(ROOT, context, ignore=CONTEXT_IGNORE)
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
            lambda: _remove_tree(self.run_dir),
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
                try:
                    _remove_tree(run_dir)
                except (OSError, RuntimeError) as err:
                    print(f"compose harness: cannot remove {run_dir}: {err}", file=sys.stderr)
                continue
            if not _alive(stale.owner):
                stale.close()


class HealthChecks(threading.Thread):
    """Runs the containers' healthchecks, which podman leaves to systemd timers (none here):
    every second until a container is healthy, then every ten seconds. Each check runs in a
    thread of its own, as the engine's timers would: one that hangs (the proxy's, while nginx
    still connects to an api container that was just replaced) holds up no other container's."""

    def __init__(self, deployment: Deployment):
        super().__init__(daemon=True, name="podman-healthchecks")
        self.deployment = deployment
        self._halt = threading.Event()
        self._last: dict[str, float] = {}
        self._running: dict[str, threading.Thread] = {}

    def stop(self) -> None:
        """No new checks, and the ones still running get a while to end (their containers are
        gone by now) before the engine and its storage are."""
        self._halt.set()
        self.join(10)
        deadline = time.monotonic() + 30
        for check in list(self._running.values()):
            check.join(max(0.0, deadline - time.monotonic()))

    def run(self) -> None:
        while not self._halt.wait(1.0):
            try:
                self._check()
            except Exception as err:  # a slow or failing podman call: try again next round
                print(f"compose harness healthchecks: {err}", file=sys.stderr)

    def _check(self) -> None:
        d = self.deployment
        label = f"label=com.docker.compose.project={d.project}"
        listing = d.podman("ps", "--filter", label, "--format", "{{.ID}} {{.Status}}", check=False)
        for line in listing.stdout.splitlines():
            container, _, status = line.partition(" ")
            every = 10.0 if "(healthy)" in status else 1.0
            running = self._running.get(container)
            if running is not None and running.is_alive():
                continue
            if time.monotonic() - self._last.get(container, 0.0) >= every:
                self._last[container] = time.monotonic()
                self._running[container] = check = threading.Thread(
                    target=self._run_one, args=(container,), daemon=True,
                    name=f"podman-healthcheck-{container}",
                )  # fmt: skip
                check.start()

    def _run_one(self, container: str) -> None:
        try:
            self.deployment.podman("healthcheck", "run", container, check=False, timeout=60)
        except Exception as err:
            print(f"compose harness healthchecks: {err}", file=sys.stderr)


# --- the cache ----------------------------------------------------------------------------
def prepare_cache(cache: Path, deadline: Deadline, say=print) -> tuple[Path, Path]:
    """The cached base rootfs and dependency wheels, built when missing. Under the cache's lock:
    a concurrent run waits for this one's build (within its own deadline) instead of doing it
    twice, and whatever it finds in `building-*` folders was left by a run that died."""
    cache.mkdir(parents=True, exist_ok=True)
    with _stage(say, f"cache ready in {cache}"), _cache_lock(cache, deadline):
        _clear_abandoned(cache, say)
        rootfs = base_rootfs(cache, deadline, say)
        version = (rootfs / "python-version").read_text().strip()
        wheels = dependency_wheels(cache, version, deadline, say)
    return rootfs, wheels


@contextlib.contextmanager
def _cache_lock(cache: Path, deadline: Deadline):
    """flock: released by the kernel when its holder dies, however it dies."""
    fd = os.open(cache / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                deadline.left()  # raises once the deadline has passed
                time.sleep(1.0)  # another run is building the cache
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _building(cache: Path, what: str):
    """A folder to build `what` in; removed afterwards whatever happened. The caller renames a
    complete artifact out of it into the cache before it goes."""
    work = Path(tempfile.mkdtemp(prefix=f"building-{what}-", dir=cache))
    try:
        yield work
    finally:
        try:
            _discard(work)
        except Exception as err:  # the next run takes it over; never hide the build's own error
            print(f"compose harness: cannot remove {work}: {err}", file=sys.stderr)


def _clear_abandoned(cache: Path, say=print) -> None:
    """With the cache's lock held: remove what builds of runs that died left behind."""
    for entry in sorted(cache.iterdir()):
        name = entry.name
        if name.startswith("building-"):
            _discard(entry, say)  # nobody builds there: we hold the lock
        # Left by earlier versions of this harness, which built without a lock: a TemporaryDirectory
        # (tmp*) with debootstrap's rootfs in it, partial files, and the old tarball layout.
        elif name.startswith("tmp") and entry.is_dir():
            if not _processes_in(entry):  # one still running there may belong to a live run
                _discard(entry, say)
        elif entry.is_file() and re.fullmatch(r"rootfs-.*\.(tar|python|partial)", name):
            entry.unlink()
        elif name.endswith(".partial") and entry.is_dir():
            _discard(entry, say)


def _discard(path: Path, say=None) -> None:
    """End what still runs in an abandoned build folder, unmount what is mounted in it (a killed
    debootstrap leaves /proc, /sys, /dev/pts... mounted in its chroot), then remove it."""
    killed, mounts = _kill_processes_in(path), _mounts_below(path)
    _remove_tree(path)
    if say is not None:
        say(
            f"removed an abandoned build, {path.name}: {len(killed)} processes ended, "
            f"{len(mounts)} mounts unmounted ({', '.join(m[len(str(path)) :] for m in mounts)})"
        )


def base_rootfs(cache: Path, deadline: Deadline, say=print) -> Path:
    """A minimal Debian of the host's release with Python and redis-server: a folder with
    rootfs.tar and python-version (the image's Python), renamed into place when complete."""
    codename = _host_codename()
    key = hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:12]
    done = cache / f"rootfs-{codename}-{key}"
    if (done / "rootfs.tar").is_file() and (done / "python-version").is_file():
        return done
    say(f"building the base rootfs with debootstrap in {cache}/building-rootfs-*")
    with _stage(say, "base rootfs built"), _building(cache, "rootfs") as work:
        rootfs, out = work / "rootfs", work / "out"
        out.mkdir()
        _run(
            [*NICE, "debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
             codename, str(rootfs), _apt_mirror(codename)],
            None, deadline.left(), True,
        )  # fmt: skip
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / junk).glob("*"):
                if path.is_file():
                    path.unlink()
        version = _run(
            ["chroot", str(rootfs), "python3", "-c", "import platform; print(platform.python_version())"],
            None, deadline.left(120), True,
        ).stdout.strip()  # fmt: skip
        (out / "python-version").write_text(version + "\n")
        # --one-file-system: never archive something still mounted in the chroot.
        _run(
            [*NICE, "tar", "--one-file-system", "-C", str(rootfs), "-cf", str(out / "rootfs.tar"), "."],
            None, deadline.left(), True,
        )  # fmt: skip
        _remove_tree(done)  # an incomplete one, from before the cache had this layout
        out.rename(done)
    return done


def dependency_wheels(cache: Path, python_version: str, deadline: Deadline, say=print) -> Path:
    """Wheels of the project's dependencies and build backend for the image's Python (which is
    not necessarily the Python running the tests), downloaded on the host."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # The image installs the lock's exact versions (Dockerfile): those wheels, and the backend's.
    lock = ROOT / "requirements" / "run.lock"
    requirements = ["-r", str(lock), *pyproject["build-system"]["requires"]]
    stated = [python_version, lock.read_text(), *requirements[2:]]
    key = hashlib.sha256(" ".join(stated).encode()).hexdigest()[:12]
    done = cache / f"wheels-{python_version}-{key}"
    if done.is_dir():
        return done
    with (
        _stage(say, f"wheels for Python {python_version} downloaded"),
        _building(cache, "wheels") as work,
    ):
        wheels = work / "wheels"
        _run(
            [*NICE, *_pip_download(python_version), "--quiet", "--disable-pip-version-check",
             "--only-binary=:all:", "--dest", str(wheels), *requirements, "wheel"],
            None, deadline.left(), True,
        )  # fmt: skip
        wheels.rename(done)
    return done


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


# --- processes and mounts -------------------------------------------------------------------
def _run(cmd, env, timeout, check, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run, except that the command gets a session of its own and a timeout or an
    interrupt kills all of it (debootstrap's dpkg in the chroot, not only debootstrap)."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    with subprocess.Popen(cmd, env=env, text=True, start_new_session=True, **kwargs) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException as err:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if isinstance(err, subprocess.TimeoutExpired):
                raise RuntimeError(
                    f"{' '.join(cmd)} did not finish within {timeout:.0f} s"
                ) from None
            raise
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


def _processes_in(path: Path) -> list[int]:
    """Processes working in `path`: their root (a chroot), their working directory or one of
    their arguments is in it."""
    prefix = str(path)
    inside = prefix + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = [os.readlink(entry / "root"), os.readlink(entry / "cwd")]
            args = os.fsdecode((entry / "cmdline").read_bytes()).split("\0")
        except OSError:  # gone, or a zombie
            continue
        if any(link == prefix or link.startswith(inside) for link in links) or any(
            arg == prefix or inside in arg for arg in args
        ):
            found.append(int(entry.name))
    return found


def _kill_processes_in(path: Path, timeout: float = 30.0) -> set[int]:
    """SIGKILL what a dead run left running in its build folder, until nothing is left."""
    deadline = time.monotonic() + timeout
    killed: set[int] = set()
    while pids := _processes_in(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} still run in {path}")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.2)  # then look again: they are gone, or others were started meanwhile
    return killed


def _mounts_below(path: Path) -> list[str]:
    """Mount points at or below `path`, from /proc/self/mountinfo."""
    prefix = os.fsencode(str(path))
    points = []
    for line in Path("/proc/self/mountinfo").read_bytes().splitlines():
        # The fifth field is the mount point, with space, tab, newline and backslash as \ooo.
        point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split(b" ")[4])
        if point == prefix or point.startswith(prefix + b"/"):
            points.append(os.fsdecode(point))
    return points


def _unmount_below(path: Path) -> None:
    """Unmount (lazily, deepest first) everything mounted at or below `path`: storage mounts
    podman left, /proc and the like in a killed debootstrap's chroot."""
    for _ in range(5):
        points = _mounts_below(path)
        if not points:
            return
        for point in sorted(points, key=lambda p: (p.count("/"), len(p)), reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True, timeout=60)
    points = _mounts_below(path)
    if points:
        raise RuntimeError(f"cannot unmount {', '.join(points)}")


def _remove_tree(path: Path) -> None:
    """rmtree, never through a mount point: it would delete what is mounted (a chroot's /dev
    may be the host's, bind-mounted)."""
    if not path.exists():
        return
    _unmount_below(path)  # raises if anything stays mounted
    shutil.rmtree(path)


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
