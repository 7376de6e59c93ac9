"""Docker executor: each training runs in its own labelled container, which is always removed afterwards.

``container_spec`` is a pure function (settings -> ``containers.create`` kwargs) so that dry runs and unit
tests see exactly what the executor would ask the daemon for. ``DockerExecutor`` adds what needs the daemon:
the image check, start, log streaming into the run dir, the timeout, the exit state and the removal.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import docker
import docker.errors
import requests
from docker.types import DeviceRequest
from docker.types import Mount as MountSpec
from pydantic import Field, PositiveFloat

from harness.errors import InfraError, WorkloadError
from harness.executors.base import ENV_ALLOWLIST, LABEL_PREFIX, owner_gone
from harness.launch import ExecResult, Launch, argv_lines
from harness.rundir import RunDir
from harness.settings import ExecutorOptions, ExecutorSettingsBase
from harness.signals import interrupts, note_stopped
from harness.strict import Strict

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

IMAGE_KIND_LABEL = "io.harness.image.kind"  # "host-python" on images made by `python -m harness image build-cpu`
TARGET_LABEL = "io.harness.target.verl"  # the verl a self-contained image holds (docker/Dockerfile.ascend)
HOST_PYTHON = "host-python"
CONTAINER_HOME = "/tmp"  # writable whatever the uid; the host's HOME means nothing inside
# Host variables that describe the host's filesystem (PATH, HOME, TMPDIR) would break the image's own.
CONTAINER_ENV_ALLOWLIST = tuple(k for k in ENV_ALLOWLIST if k not in ("PATH", "HOME", "TMPDIR"))
ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ASCEND_DRIVER_PATHS = (
    "/usr/local/Ascend/driver",
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/etc/ascend_install.info",
)
DAEMON_TIMEOUT_S = 30  # connect and the sweep alike: a daemon starting trainings on a loaded runner answers slowly
STOP_GRACE_S = 5  # SIGTERM -> SIGKILL on timeout; the trainings hold nothing worth a clean shutdown
BUILD_CPU_HINT = "python -m harness image build-cpu --tag {image}"


class Mount(Strict):
    source: str
    target: str
    read_only: bool = True


def unsafe_line(rt: DockerRuntime) -> str | None:
    """What a run with ``unsafe: true`` says, on stderr, in the dry run and in results.json's environment."""
    risks = rt.risks() if rt.unsafe else []
    return f"UNSAFE container ({rt.unsafe_reason}): {'; '.join(risks)}" if risks else None


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


DOCKER_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
DANGEROUS_ENV = re.compile(r"^(LD_|PYTHON)")  # the loader and the interpreter: code run before the training's


class DockerRuntime(ExecutorOptions):
    """Container settings; used when the executor kind is ``docker``."""

    image: str = Field(
        "verl-msprobe-harness:cpu",
        description="local image (no registry is used); make the CPU one with `python -m harness image build-cpu`",
    )
    image_kind: Literal["auto", "self_contained", "host_python"] = Field(
        "auto",
        description="self_contained: the image has python3 and the harness (docker/Dockerfile.*); host_python: a "
        "bare rootfs that runs the harness's own interpreter, venv and source, bind-mounted read-only with /usr at "
        "the same paths; auto: read the image's io.harness.image.kind label",
    )
    npu_devices: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list, description="Ascend NPU ids: /dev/davinci{N} plus the driver devices and mounts"
    )
    ascend_runtime: bool = Field(False, description="use the Ascend container runtime (ASCEND_VISIBLE_DEVICES)")
    gpus: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, description="CUDA GPU ids")
    shm_size: str = "2g"
    env: dict[str, str] = Field(default_factory=dict, description="extra container environment")
    pass_env: list[str] = Field(default_factory=list, description="host variables passed through when set")
    mounts: list[Mount] = Field(default_factory=list)
    user: str | None = Field(None, description="uid:gid; default: the host user running the harness")
    cpus: PositiveFloat | None = None
    memory: str | None = Field(None, description='e.g. "8g"; the container is OOM-killed above it')
    network: Literal["none", "host", "bridge"] | None = Field(
        None, description="default: host with accelerators (HCCL/NCCL bind the host's interfaces), none without"
    )

    @property
    def accelerators(self) -> bool:
        return bool(self.npu_devices or self.gpus or self.ascend_runtime)

    def risks(self, device: str | None = None, host_uid: int | None = None) -> list[str]:
        """The host `/`, a docker socket (or a dir holding one), root in the container where the harness is not,
        LD_*/PYTHON* variables, host network without accelerators, devices on a CPU scenario. (Privileges and
        capabilities cannot be asked for at all: not fields.)"""
        out = []
        for m in self.mounts:
            real = os.path.realpath(m.source)
            sockets = [s for s in DOCKER_SOCKETS if s == real or s.startswith(real.rstrip("/") + "/")]
            if real == "/":
                out.append(f"mounts: the host's / ({m.source})")
            elif sockets or _is_socket(real) or real.endswith("docker.sock"):
                out.append(f"mounts: the docker socket ({m.source}): control of the host")
        uid = os.getuid() if host_uid is None else host_uid
        if self.user is not None and self.user.split(":")[0] in ("0", "root") and uid != 0:
            out.append(f"user {self.user}: root in the container while the harness runs as uid {uid}")
        if bad := sorted(k for k in [*self.env, *self.pass_env] if DANGEROUS_ENV.match(k)):
            out.append(f"env/pass_env {', '.join(bad)}: loader or interpreter variables")
        if self.network == "host" and not self.accelerators:
            out.append("network: host without accelerators (none is enough)")
        if device == "cpu" and self.accelerators:
            out.append("npu_devices/gpus/ascend_runtime on a cpu scenario")
        return out


@dataclass(frozen=True)
class HostPython:
    """The harness's own interpreter and the host paths a bare rootfs image needs to run it."""

    executable: str
    paths: tuple[str, ...]


def host_python() -> HostPython:
    """/usr, the base Python install, the venv, the harness source (editable installs live outside the venv),
    non-merged top-level lib dirs, the loader cache, fontconfig (matplotlib) and the time zone: mounted
    read-only at the same paths, so the container runs the very interpreter and packages the local
    executor runs."""
    wanted = [
        "/usr",
        sys.base_prefix,
        sys.prefix,
        str(Path(__file__).resolve().parents[1]),  # the harness package
        str(Path(os.path.realpath(sys.executable)).parent),
        *(f"/{d}" for d in ("bin", "lib", "lib32", "lib64", "libx32") if _is_real_dir(f"/{d}")),
        *(f for f in ("/etc/ld.so.cache", "/etc/fonts", "/etc/localtime") if os.path.exists(f)),
    ]
    paths: list[str] = []
    for p in sorted({os.path.abspath(p) for p in wanted}, key=len):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in paths):
            paths.append(p)
    return HostPython(executable=sys.executable, paths=tuple(sorted(paths)))


def _is_real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def container_spec(
    launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str], python: str = "python3"
) -> dict[str, Any]:
    """``docker_client.containers.create(**spec)`` kwargs for one training run.

    Pure: reads only its arguments and (for the defaults) the current uid/gid and interpreter. The run dir
    and workdir are bind-mounted read-write at their host paths, so every path in the run's spec stays
    valid; inputs and extra mounts are read-only unless a mount says otherwise. ``mounts`` (not
    ``volumes``) because a missing source must be an error, not a root-owned empty dir made by dockerd.
    ``image_kind: auto`` counts as self_contained here; the executor resolves it from the image label.
    """
    rt: DockerRuntime = settings.options("docker")
    mounts: dict[str, MountSpec] = {}

    def bind(source: str | Path, target: str | Path | None = None, read_only: bool = True) -> None:
        target = str(target or source)
        mounts[target] = MountSpec(target=target, source=str(source), type="bind", read_only=read_only)

    if rt.image_kind == "host_python":
        host = host_python()
        python = launch.python or host.executable
        for p in host.paths:
            bind(p)
        if launch.python:  # a target environment (harness.target_env): layered over the mounted project venv
            bind(Path(launch.python).parent.parent)
    for inp in launch.inputs:
        bind(inp)
    for m in rt.mounts:
        bind(m.source, m.target, m.read_only)
    bind(run.root, read_only=False)
    bind(launch.workdir, read_only=False)

    env = {k: os.environ[k] for k in CONTAINER_ENV_ALLOWLIST if k in os.environ}
    env.update(HOME=CONTAINER_HOME, PYTHONUNBUFFERED="1")
    env.update({k: os.environ[k] for k in rt.pass_env if k in os.environ})
    env.update(rt.env)
    env.update(launch.env)  # the harness's own variables (metrics path...) win over the scenario's

    devices: list[str] = []
    groups: list[int] = []
    if rt.npu_devices and rt.ascend_runtime:
        env["ASCEND_VISIBLE_DEVICES"] = ",".join(map(str, rt.npu_devices))
    elif rt.npu_devices:
        devices += [f"/dev/davinci{n}:/dev/davinci{n}:rwm" for n in rt.npu_devices]
        devices += [f"{d}:{d}:rwm" for d in ASCEND_CONTROL_DEVICES]
        for p in ASCEND_DRIVER_PATHS:
            bind(p)
        # the container sees only the passed chips, numbered from 0 by the Ascend runtime library
        env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(rt.npu_devices)))
        # the nodes belong to group HwHiAiUser on a runner: the host uid opens them only as a member of it
        groups = sorted({os.stat(d.split(":")[0]).st_gid for d in devices if os.path.exists(d.split(":")[0])})

    spec: dict[str, Any] = {
        "image": rt.image,
        "command": launch.argv(python),
        "environment": env,
        "working_dir": str(launch.workdir),
        "mounts": [mounts[t] for t in sorted(mounts)],
        "labels": dict(labels),
        "user": rt.user or f"{os.getuid()}:{os.getgid()}",
        "shm_size": rt.shm_size,
        "network_mode": rt.network or ("host" if rt.accelerators else "none"),
        "init": True,  # docker-init as pid 1: forwards SIGTERM on stop and reaps the rank processes
    }
    if rt.memory:
        spec["mem_limit"] = spec["memswap_limit"] = rt.memory  # no swap: the limit is the limit
    if rt.cpus:
        spec["nano_cpus"] = int(rt.cpus * 1e9)
    if devices:
        spec["devices"] = devices
    if groups:
        spec["group_add"] = [str(g) for g in groups]
    if rt.ascend_runtime:
        spec["runtime"] = "ascend"
    if rt.gpus:
        spec["device_requests"] = [DeviceRequest(device_ids=[str(g) for g in rt.gpus], capabilities=[["gpu"]])]
    return spec


def _daemon_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock (DOCKER_HOST is not set)"


def connect() -> DockerClient:
    """A client for the daemon named by DOCKER_HOST (or the default socket); InfraError if it does not answer."""
    try:
        client = docker.from_env(timeout=DAEMON_TIMEOUT_S)
        client.ping()
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise InfraError(
            f"Docker daemon not reachable at {_daemon_address()}: {_short(exc)}. Start one with "
            "`eval $(.ci/dockerd.sh start)` (it prints the DOCKER_HOST to export), or set DOCKER_HOST to a running "
            "daemon's socket; or run with --executor local."
        ) from exc
    return client


def _labelled(client: DockerClient, target: str) -> Any:
    """The newest local image labelled as holding ``target`` (base and head of a comparison each have one), or None."""
    built = client.images.list(filters={"label": f"{TARGET_LABEL}={target}"})
    return max(built, key=lambda i: str(i.attrs.get("Created", ""))) if built else None


def resolve_settings(
    client: DockerClient, settings: ExecutorSettingsBase, target: str | None = None
) -> ExecutorSettingsBase:
    """Check that the image exists locally and resolve ``image_kind: auto`` from its label. ``target``: the verl
    identity a self-contained image must hold (its ``io.harness.target.verl`` label); None: whatever it holds.
    The scenario's image is looked up by name first; when it is missing or holds another verl, a local image
    labelled with ``target`` stands in (verl-compare builds one per side, under tags the scenarios do not name)."""
    rt: DockerRuntime = settings.options("docker")
    name = rt.image
    try:
        image = client.images.get(rt.image)
    except docker.errors.ImageNotFound as exc:
        if not target or (image := _labelled(client, target)) is None:
            label = f", nor any image labelled {TARGET_LABEL}={target}" if target else ""
            raise InfraError(
                f"image {rt.image!r} not found on the Docker daemon at {_daemon_address()}{label} (nothing is "
                f"pulled). Build it: `{BUILD_CPU_HINT.format(image=rt.image)}` (CPU, no registry needed), `docker "
                f"build -f docker/Dockerfile.cpu -t {rt.image} .`, or for a verl under test `python -m harness image "
                "ascend-context --verl SPEC --build` (see docker/README.md)."
            ) from exc
        name = image.tags[0] if image.tags else str(image.id)
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise InfraError(f"cannot inspect image {rt.image!r}: {_short(exc)}") from exc
    labels = image.labels or {}
    kind = rt.image_kind
    if kind == "auto":
        kind = "host_python" if labels.get(IMAGE_KIND_LABEL) == HOST_PYTHON else "self_contained"
    if kind == "self_contained" and target and labels.get(TARGET_LABEL) != target:
        if (built := _labelled(client, target)) is None:
            holds = labels.get(TARGET_LABEL) or f"its base image's verl (no {TARGET_LABEL} label)"
            raise InfraError(
                f"image {rt.image!r} holds {holds}, the run asks for {target}, and no local image is labelled "
                f"{TARGET_LABEL}={target}: build one (python -m harness image ascend-context --verl SPEC, see "
                "docker/README.md)"
            )
        name = built.tags[0] if built.tags else str(built.id)
    return settings.model_copy(update={"docker": rt.model_copy(update={"image_kind": kind, "image": name})})


def _short(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return str(text).strip().splitlines()[0][:300] if text else type(exc).__name__


class DockerExecutor:
    name: ClassVar[str] = "docker"
    settings: ClassVar[Any] = DockerRuntime

    def __init__(self, client: DockerClient | None = None) -> None:
        self._client = client

    def execute(
        self,
        launch: Launch,
        run: RunDir,
        settings: ExecutorSettingsBase,
        labels: dict[str, str],
        stop: threading.Event | None = None,
    ) -> ExecResult:
        rt: DockerRuntime = settings.options("docker")
        if why := rt.refusal("executor.docker"):  # settings made in code, past the scenario's validation
            raise WorkloadError(why)
        if line := unsafe_line(rt):
            print(f"harness: {line}", file=sys.stderr, flush=True)
        client = self._client or connect()
        settings = resolve_settings(client, settings, launch.target)
        spec = container_spec(launch, run, settings, labels)
        # unique, so that a container left by a killed harness never blocks a new run
        spec["name"] = "-".join(
            ["harness", *(labels.get(f"{LABEL_PREFIX}.{k}", "") for k in ("scenario", "run")), uuid.uuid4().hex[:8]]
        )
        try:
            with interrupts():  # a SIGTERM (CI job cancelled) unwinds like Ctrl-C: the container is still removed
                return _run(client, spec, run, settings, stop or threading.Event())
        except KeyboardInterrupt as exc:
            note_stopped(exc, f"container {spec['name']} (removed)")
            raise
        finally:
            _remove(client, spec["name"])

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        spec = container_spec(launch, run, settings, labels)
        rt: DockerRuntime = settings.options("docker")
        out = [f"image: {spec['image']}" + ("" if rt.image_kind == "auto" else f" ({rt.image_kind})")]
        out += [line] if (line := unsafe_line(rt)) else []
        devices = spec.get("devices", [])
        if spec.get("runtime"):
            devices = [*devices, f"runtime={spec['runtime']}"]
        out.append(
            f"devices: {', '.join(d.split(':')[0] for d in devices if ':' in d) or 'none'}"
            + (f" (runtime {spec['runtime']})" if spec.get("runtime") else "")
        )
        if spec.get("device_requests"):
            out.append(f"gpus: {', '.join(','.join(r['DeviceIDs']) for r in spec['device_requests'])}")
        out.append(
            f"container: user {spec['user']}"
            + (f" (groups {','.join(spec['group_add'])}: the device nodes' owners)" if spec.get("group_add") else "")
            + f", workdir {spec['working_dir']}, shm {spec['shm_size']}, "
            f"network {spec['network_mode']}, timeout {settings.timeout_s:g}s"
            + (f", memory {spec['mem_limit']}" if spec.get("mem_limit") else "")
        )
        out.append("mounts:")
        out += [f"  {m['Source']} -> {m['Target']} ({'ro' if m['ReadOnly'] else 'rw'})" for m in spec["mounts"]]
        out.append("env:")
        out += [f"  {k}={v}" for k, v in sorted(spec["environment"].items())]
        out.append("argv:")
        out += argv_lines(spec["command"])
        return out

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        rt: DockerRuntime = settings.options("docker")
        return {"image": rt.image, **({"container_unsafe": line} if (line := unsafe_line(rt)) else {})}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        rt: DockerRuntime = settings.options("docker")
        return {"npu": rt.npu_devices, "cuda": rt.gpus}.get(device)

    def sweep(self) -> list[str]:
        """Remove the harness-labelled containers whose harness process (on this host) is gone."""
        try:
            client = self._client or docker.from_env(timeout=DAEMON_TIMEOUT_S)
            found = client.containers.list(all=True, filters={"label": f"{LABEL_PREFIX}.session"})
        except (docker.errors.DockerException, requests.RequestException) as exc:
            if isinstance(exc, requests.Timeout) or isinstance(exc.__context__, requests.Timeout):
                # a daemon busy with the trainings, not a missing one: said, so leftovers are never hidden
                return [f"stale containers not looked for: the Docker daemon did not answer in {DAEMON_TIMEOUT_S} s"]
            return []  # no daemon here: nothing of ours can be left on it
        lines = []
        for c in found:
            labels = c.labels or {}
            if owner_gone(labels):
                _remove(client, c.id or "")
                lines.append(
                    f"removed stale container {c.name} ({c.status}; scenario {labels.get(f'{LABEL_PREFIX}.scenario')}"
                    f", its harness pid {labels.get(f'{LABEL_PREFIX}.pid')} is gone)"
                )
        return lines


def _run(
    client: DockerClient, spec: dict[str, Any], run: RunDir, settings: ExecutorSettingsBase, stop: threading.Event
) -> ExecResult:
    started = time.monotonic()
    try:
        container = client.containers.create(**spec)
        container.start()
    except docker.errors.APIError as exc:
        raise InfraError(
            f"cannot start a container from image {spec['image']!r}: {_short(exc)} "
            f"(command {spec['command'][0]!r}, mounts {[m['Source'] for m in spec['mounts']]})"
        ) from exc
    logs = threading.Thread(target=_copy_logs, args=(container, run.log), daemon=True)
    logs.start()
    ended = threading.Event()
    threading.Thread(target=_stop_when, args=(stop, ended, container), daemon=True).start()
    timed_out = False
    try:
        try:
            status = container.wait(timeout=max(1.0, settings.timeout_s - (time.monotonic() - started)))
        except requests.RequestException:
            if time.monotonic() - started < settings.timeout_s - 0.5:
                raise  # not the read timeout of the wait call: the daemon went away
            timed_out = True
            with contextlib.suppress(docker.errors.APIError):
                container.stop(timeout=STOP_GRACE_S)  # SIGTERM, then SIGKILL after the grace
            with contextlib.suppress(docker.errors.APIError):
                container.kill()
            status = container.wait(timeout=60)
        wall = time.monotonic() - started
        logs.join(timeout=10)
        container.reload()
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise InfraError(f"lost the Docker daemon at {_daemon_address()} during the run: {_short(exc)}") from exc
    finally:
        ended.set()
    state = container.attrs.get("State", {})
    return ExecResult(
        exit_code=status.get("StatusCode"),
        wall_s=wall,
        timed_out=timed_out,
        stopped=stop.is_set() and not timed_out,
        oom_killed=bool(state.get("OOMKilled")),
        detail=f"container {spec['name']} ({spec['image']}); logs in {run.log.name}",
        argv=list(spec["command"]),
    )


def _stop_when(stop: threading.Event, ended: threading.Event, container: Container) -> None:
    """Stop the container once the monitor asks (its wait then returns); done when the run ends anyway."""
    while not ended.wait(0.2):
        if stop.is_set():
            with contextlib.suppress(docker.errors.APIError, requests.RequestException):
                container.stop(timeout=STOP_GRACE_S)
            return


def _copy_logs(container: Container, log: Path) -> None:
    """stdout and stderr, as they come, into the run's log file (live, so a timeout still has a tail)."""
    with log.open("wb") as out:
        try:
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                out.write(chunk)
                out.flush()
        except (docker.errors.APIError, requests.RequestException):
            pass  # the container went away (removed on Ctrl-C): what was copied stays


def _remove(client: DockerClient, name: str) -> None:
    """Force-remove the container, even across a second Ctrl-C (re-raised once it is gone)."""
    interrupted: BaseException | None = None
    for _ in range(3):
        try:
            client.api.remove_container(name, force=True)
            break
        except docker.errors.NotFound:
            break
        except KeyboardInterrupt as exc:
            interrupted = exc
        except (docker.errors.APIError, requests.RequestException) as exc:
            if "already in progress" in str(exc):
                break
            print(f"harness: could not remove container {name}: {_short(exc)}", file=sys.stderr)
    if interrupted:
        raise interrupted
