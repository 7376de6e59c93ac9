"""The ``executor.ray`` block: a scenario's trainings submitted to an existing Ray cluster with Ray's Job Submission
API (``harness.training.executors.ray_job``), every node's dumps gathered inside the job.

The address is the cluster's dashboard (where the Job Submission API answers); ``--ray-address`` and
``HARNESS_RAY_ADDRESS`` name it for every scenario of a command and win over this block's. The token is never a
field: it comes from Ray's own places on the harness's host (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``,
``~/.ray/auth_token``), so a scenario file never holds it."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import ClassVar

from pydantic import Field, field_validator

from harness.outside import shown
from harness.scenario.blocks import ExecutorOptions

_ADDRESS = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(?::\d{1,5})?/?$")
# a variable every node's shell, Ray's runtime environment and a pod's spec all take: the portable name
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_address(value: str) -> str:
    """A dashboard address ``http(s)://HOST[:PORT]``; ValueError in one line otherwise (the value shown, its
    credentials masked)."""
    if not _ADDRESS.match(value):
        raise ValueError(
            f"'{shown(value, 200)}' is not the address of a Ray cluster's dashboard (the Job Submission API): "
            "http://HEAD:8265 or https://HOST[:PORT]"
        )
    return value.rstrip("/")


def check_env(env: dict[str, str]) -> dict[str, str]:
    """The job's extra variables, each one the cluster takes: a name of letters, digits and '_' (not first a digit)
    and a value without a NUL. A name such as ``A=B`` validated before would be refused by the node's shell, by
    Ray's runtime environment or by the pod's spec once the job is submitted; ValueError in one line here."""
    for key, value in env.items():
        if not ENV_KEY.fullmatch(key):
            raise ValueError(
                f"key '{shown(key, 80)}' is not a variable name every node takes: letters, digits and '_', not "
                "starting with a digit"
            )
        if "\0" in value:
            raise ValueError(f"{key}: its value holds a NUL byte, which no process environment can hold")
    return env


class ClusterRuntime(ExecutorOptions):
    """What every executor that runs the trainings on a Ray cluster's nodes has: each node's scratch dir, the job's
    extra environment (``ray``: a cluster that is already running; ``rayjob``: one made for each job by verl's
    RayJob submitter)."""

    on_cluster: ClassVar[bool] = True
    # the interpreter on the nodes; None: the target's at the same path as on the harness's host (a shared image)
    node_python: ClassVar[str | None] = None

    scratch: str = Field(
        "/tmp/harness-ray",
        description="a directory on every node's own disk: each run's save_path, metrics and msprobe config lie in "
        "a directory of its own under it until the job has gathered them into the results dir, then it is removed",
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment of the job (every node)")

    @field_validator("scratch")
    @classmethod
    def _scratch(cls, value: str) -> str:
        return absolute_dir(value)

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return check_env(value)


def absolute_dir(value: str) -> str:
    """An absolute directory below / without '..' (the same path on every node); ValueError in one line."""
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts or path == PurePosixPath("/"):
        raise ValueError(f"{value!r}: an absolute directory below / on every node, without '..'")
    return str(path)


class RayRuntime(ClusterRuntime):
    """A Ray cluster that is already running; the harness submits each training to it as a Ray job."""

    address: str | None = Field(
        None,
        description="the cluster's dashboard, http://HEAD:8265 (--ray-address or HARNESS_RAY_ADDRESS win over it)",
    )

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else check_address(value)
