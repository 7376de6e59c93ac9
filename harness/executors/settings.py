"""Executor settings of a scenario: where its trainings run (a local process or a container)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat

from harness.strict import Strict


class Mount(Strict):
    source: str
    target: str
    read_only: bool = True


class DockerRuntime(Strict):
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
    network: Literal["none", "host", "bridge"] = "host"


class ExecutorSettings(Strict):
    kind: Literal["local", "docker"] = "local"
    timeout_s: PositiveFloat = Field(900, description="per training run; the run is killed past it")
    docker: DockerRuntime = DockerRuntime()
