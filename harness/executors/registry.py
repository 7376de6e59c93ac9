"""Executors by name; a new executor is one module plus a line here."""

from __future__ import annotations

from harness.executors.base import Executor
from harness.executors.local import LocalExecutor


def get_executor(kind: str) -> Executor:
    if kind == "local":
        return LocalExecutor()
    if kind == "docker":
        from harness.executors.docker import DockerExecutor  # imports the docker SDK only when used

        return DockerExecutor()
    raise ValueError(f"unknown executor {kind!r}")
