"""What the docker executor's options block (``harness.scenario.settings.docker``) means on the host: the labels,
paths and limits of its containers, and the line a run with ``unsafe: true`` says out loud."""

from __future__ import annotations

from harness.scenario.settings.docker import DockerRuntime
from harness.training.executors.base import ENV_ALLOWLIST

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


def unsafe_line(rt: DockerRuntime) -> str | None:
    """What a run with ``unsafe: true`` says, on stderr, in the dry run and in results.json's environment."""
    risks = rt.risks() if rt.unsafe else []
    return f"UNSAFE container ({rt.unsafe_reason}): {'; '.join(risks)}" if risks else None
