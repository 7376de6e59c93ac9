"""The ``executor.docker`` block: the docker executor's options (``harness.training.executors.docker``) and the risks
a block carries, which ``unsafe: true`` must name out loud."""

from __future__ import annotations

import os
import re
import stat
from typing import Annotated, Literal

from pydantic import Field, PositiveFloat

from harness.scenario.blocks import ExecutorOptions
from harness.strict import Strict


class Mount(Strict):
    source: str
    target: str
    read_only: bool = True


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
