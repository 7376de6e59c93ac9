"""What a container is asked for, as a pure function (settings -> ``containers.create`` kwargs), so dry runs and
unit tests see exactly what the executor would send; and the host paths a bare rootfs image needs to run the
harness's own interpreter (``host_python``)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker.types import DeviceRequest
from docker.types import Mount as MountSpec

import harness
from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.settings.docker import DockerRuntime
from harness.training.executors.docker_options import (
    ASCEND_CONTROL_DEVICES,
    ASCEND_DRIVER_PATHS,
    CONTAINER_ENV_ALLOWLIST,
    CONTAINER_HOME,
)
from harness.training.launch import Launch
from harness.training.watchdog import watched


def alive_fifo(run: RunDir) -> Path:
    """The FIFO the harness holds open while a container runs: its watchdog reads end-of-file once the harness is
    gone. In the run dir: bind-mounted read-write at its own path, it is there in the container too."""
    return run.root / ".harness-alive"


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
        str(Path(harness.__file__).resolve().parent),  # the harness package
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
        if launch.python:  # a target environment (harness.targets.environment): layered over the mounted project venv
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
        # the watchdog ends the training, and so the container, once the harness is gone (its FIFO in the run dir)
        "command": watched(python, f"fifo:{alive_fifo(run)}", launch.argv(python)),
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
