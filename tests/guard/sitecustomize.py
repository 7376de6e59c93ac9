"""The unit tier's guard: a test not marked ``trains`` must not start a training, and one not marked
``integration`` (or ``trains``) must not start a harness, pytest or verl process or build an environment.

conftest installs it in the test's own process and puts this directory on PYTHONPATH, so every Python the test
starts (``python -m harness ...``, a pytest subprocess) imports it as its ``sitecustomize`` and installs it too.
A training is the start of a workload's program: the embedded one, verl's real trainer or its CPU launcher.
(The executors pass an allowlisted environment to the training itself: the guard sits in the harness that starts
it.) Without the marker ``pytest tests/ -m "not trains"`` could silently grow into minutes. The second rule
holds in the test's own process only (``unmarked``, set by conftest): a process of the harness or of pytest imports
torch and verl (seconds to a minute each on two cores), a target environment is a uv install; ``-m "not trains and
not integration"`` is the unit tier.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from typing import Any

ENV = "UNIT_TEST_MUST_NOT_TRAIN"  # the unmarked test's node id, set by conftest (not HARNESS_*: tests strip those)
WORKLOAD_PROGRAMS = frozenset(
    {"harness.training.workloads.cpu_ppo.train", "harness.training.workloads.verl_cpu.main", "verl.trainer.main_ppo"}
)


# what makes a test an integration test: ``python -m <one of these>`` (or a submodule), one of these programs, or a
# script of .ci/
INTEGRATION_MODULES = ("harness", "pytest", "msprobe")
INTEGRATION_PROGRAMS = frozenset({"uv", "docker"})
unmarked = ""  # the node id of a test not marked integration or trains, while it runs in this process


class TrainingInUnitTest(RuntimeError):
    """Raised where a training would start."""


class ProcessInUnitTest(RuntimeError):
    """Raised where an unmarked test would start a harness, pytest or verl process, or build an environment."""


def integration_process(args: list[str]) -> str | None:
    """What in ``args`` makes it an integration test's process, or None."""
    if args and os.path.basename(args[0]) in INTEGRATION_PROGRAMS:
        return os.path.basename(args[0])
    if len(args) > 1 and os.path.basename(args[0]) in ("bash", "sh") and args[1].startswith(".ci/"):
        return f"{args[0]} {args[1]}"  # the CI's scripts run the harness
    for flag, module in itertools.pairwise(args):
        if flag == "-m" and module.split(".")[0] in INTEGRATION_MODULES:
            return f"-m {module}"
    return None


def refuse(argv: Any) -> None:
    args = [str(a) for a in argv] if isinstance(argv, list | tuple) else [str(argv)]
    program = next((a for a in args if a in WORKLOAD_PROGRAMS), None)
    if program is not None and os.environ.get(ENV):
        raise TrainingInUnitTest(
            f"{os.environ[ENV]} started a training ({program}) but is not marked trains: "
            "add @pytest.mark.trains (or pytestmark) so the unit tier (-m 'not trains') stays fast"
        )
    if unmarked and (what := integration_process(args)):
        raise ProcessInUnitTest(
            f"{unmarked} started a process ({what}) but is not marked integration: add @pytest.mark.integration (or "
            "pytestmark) so the unit tier (-m 'not trains and not integration') stays fast"
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
