"""Docker executor: each training runs in its own labelled container, which is always removed afterwards.

The options block is ``harness.scenario.settings.docker``, what it means on the host (labels, paths, limits)
``docker_options``, the pure spec of a container ``docker_spec``. ``DockerExecutor`` adds what
needs the daemon: the image check, start, log streaming into the run dir, the timeout, the exit state and the
removal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import docker
import docker.errors
import docker.utils
import requests
from docker.constants import IS_WINDOWS_PLATFORM

from harness import config
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.errors import HarnessError, InfraError, WorkloadError
from harness.outside import shown
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.settings.docker import DockerRuntime
from harness.signals import interrupts, note_stopped
from harness.training.executors.base import LABEL_PREFIX, owner_gone
from harness.training.executors.docker_options import (
    BUILD_CPU_HINT,
    DAEMON_TIMEOUT_S,
    HOST_PYTHON,
    IMAGE_KIND_LABEL,
    STOP_GRACE_S,
    TARGET_LABEL,
    unsafe_line,
)
from harness.training.executors.docker_spec import alive_fifo, container_spec
from harness.training.launch import Launch, argv_lines
from harness.training.watchdog import unwatched

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container


def _daemon_address() -> str:
    return config.DOCKER_HOST.get() or "unix:///var/run/docker.sock (DOCKER_HOST is not set)"


def client_from_env() -> DockerClient:
    """A client for the daemon named by DOCKER_HOST (or the default socket). A DOCKER_HOST that names no daemon
    address is bad input, said as such (it was a harness error, and broke local runs at the container sweep)."""
    if host := config.DOCKER_HOST.get():
        try:
            docker.utils.parse_host(host, IS_WINDOWS_PLATFORM)
        except (docker.errors.DockerException, ValueError) as exc:
            raise HarnessError(
                f"DOCKER_HOST {host!r}: not a Docker daemon address ({_short(exc)}): name a daemon's socket "
                "(unix:///PATH/docker.sock, tcp://HOST:PORT), or unset it"
            ) from None
    return docker.from_env(timeout=DAEMON_TIMEOUT_S)


def connect() -> DockerClient:
    """A client for the daemon named by DOCKER_HOST (or the default socket); InfraError if it does not answer."""
    try:
        client = client_from_env()
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
            holds = shown(
                labels.get(TARGET_LABEL) or f"its base image's verl (no {TARGET_LABEL} label)"
            )  # its builder's
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
            with interrupts(), _held(alive_fifo(run)):  # a SIGTERM (CI job cancelled) unwinds like Ctrl-C: the
                return _run(client, spec, run, settings, stop or threading.Event())  # container is still removed
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
        out += argv_lines(unwatched(spec["command"]))
        out.append(f"under its watchdog (ends it when the harness is gone): {' '.join(spec['command'][:5])}")
        return out

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        rt: DockerRuntime = settings.options("docker")
        return {"image": rt.image, **({"container_unsafe": line} if (line := unsafe_line(rt)) else {})}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        rt: DockerRuntime = settings.options("docker")
        return {"npu": rt.npu_devices, "cuda": rt.gpus}.get(device)

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        """Remove the harness-labelled containers whose harness process (on this host) is gone."""
        try:
            client = self._client or client_from_env()
            found = client.containers.list(all=True, filters={"label": f"{LABEL_PREFIX}.session"})
        except HarnessError as exc:  # a DOCKER_HOST that is no address: said, and nothing else stopped
            return [f"stale containers not looked for: {exc}"]
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
                scenario, pid = (shown(labels.get(f"{LABEL_PREFIX}.{k}")) for k in ("scenario", "pid"))  # the daemon's
                lines.append(
                    f"removed stale container {shown(c.name)} ({c.status}; scenario {scenario}, its harness pid {pid} "
                    "is gone)"
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
        argv=unwatched(spec["command"]),
    )


@contextlib.contextmanager
def _held(fifo: Path) -> Iterator[None]:
    """The container's watchdog FIFO made and held open (read-write: no wait for its reader) by this process alone
    until the run is over; its end-of-file ends the training should this process die first."""
    with contextlib.suppress(FileNotFoundError):
        fifo.unlink()
    try:
        os.mkfifo(fifo)
        fifo.chmod(0o644)  # the container's user may be another (executor.docker.user)
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    except OSError as exc:
        raise InfraError(f"cannot make the watchdog's FIFO {fifo}: {exc.strerror}") from None
    try:
        yield
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            fifo.unlink()


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
