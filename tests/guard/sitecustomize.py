"""The unit tier's guard: a test not marked ``trains`` must not start a training.

conftest installs it in the test's own process and puts this directory on PYTHONPATH, so every Python the test
starts (``python -m harness ...``, a pytest subprocess) imports it as its ``sitecustomize`` and installs it too.
A training is the start of a workload's program: the embedded one, verl's real trainer or its CPU launcher.
(The executors pass an allowlisted environment to the training itself: the guard sits in the harness that starts
it.) Without the marker ``pytest tests/ -m "not trains"`` could silently grow into minutes.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

ENV = "UNIT_TEST_MUST_NOT_TRAIN"  # the unmarked test's node id, set by conftest (not HARNESS_*: tests strip those)
WORKLOAD_PROGRAMS = frozenset(
    {"harness.training.workloads.cpu_ppo_train", "harness.training.workloads.verl_cpu.main", "verl.trainer.main_ppo"}
)


class TrainingInUnitTest(RuntimeError):
    """Raised where a training would start."""


def refuse(argv: Any) -> None:
    args = [str(a) for a in argv] if isinstance(argv, list | tuple) else [str(argv)]
    program = next((a for a in args if a in WORKLOAD_PROGRAMS), None)
    if program is not None and os.environ.get(ENV):
        raise TrainingInUnitTest(
            f"{os.environ[ENV]} started a training ({program}) but is not marked trains: "
            "add @pytest.mark.trains (or pytestmark) so the unit tier (-m 'not trains') stays fast"
        )


def install() -> Any:
    """Wrap ``subprocess.Popen.__init__`` (psutil's Popen is a subclass); return the original to restore."""
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
        refuse(args)
        original(self, args, *a, **kw)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    return original


if os.environ.get(ENV):
    install()
