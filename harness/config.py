"""The harness's own settings from the environment, declared and read in this one module: each variable's type,
default and meaning once (``docs/configuration.md`` is their table, held to this module by tests/test_config.py,
which also fails on a ``HARNESS_*`` variable read anywhere else in ``harness/``).

A variable is read when its value is asked for, never at import: a workflow step, a test's
``monkeypatch.setenv`` and ``--ray-address`` (which exports ``HARNESS_RAY_ADDRESS`` to the runs it starts) change
it under a running harness. A bad value is one line naming the variable and what it takes, raised where the value
is used and only there: a bad ``HARNESS_LOCK_WAIT_S`` stops a run that waits for a lock, nothing else. An empty
variable is unset (an unset shell variable in a workflow), except a target's SPEC, where it is refused as such.

Not settings, so not here: the environments the harness builds for the processes it starts (a training's, a
container's, a sandbox's: copied from ``os.environ`` where they are built), and ``harness.job``, which runs before
anything is installed and reads only the step's own GitHub files, with the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar, cast

from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError

from harness.errors import InfraError

T = TypeVar("T")

Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Share = Annotated[float, Field(allow_inf_nan=False)]
One = Annotated[bool, BeforeValidator(lambda text: text == "1")]  # "1" on, anything else off, as always


@dataclass(frozen=True)
class Var(Generic[T]):
    """One environment variable: ``kind`` is what pydantic validates its text as, ``bad`` what the one-line error
    says a bad value should be, ``blank``: an empty value is a value (its user refuses it, naming it), not unset."""

    name: str
    default: T
    doc: str
    kind: Any = str
    bad: str = ""
    blank: bool = False

    def text(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The text as set (None: unset, or empty where empty is unset), for a child's environment or a message."""
        text = (os.environ if environ is None else environ).get(self.name)
        return text if text or (self.blank and text is not None) else None

    def get(self, environ: Mapping[str, str] | None = None) -> T:
        """The value now (``environ``: a test's mapping instead of the process's), else the default."""
        if (text := self.text(environ)) is None:
            return self.default
        try:
            return cast(T, self._adapter.validate_python(text))
        except ValidationError:
            raise InfraError(f"{self.name}={text!r}: {self.bad}") from None

    @cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.kind)


# the system under test (harness.targets.spec): each the default of its option
VERL: Var[str | None] = Var(
    "HARNESS_VERL", None, "--verl: the verl under test; default the release pinned in the project venv", blank=True
)
MSPROBE: Var[str | None] = Var(
    "HARNESS_MSPROBE", None, "--msprobe: the msprobe under test; default the pinned release", blank=True
)
SERIES: Var[str | None] = Var(
    "HARNESS_SERIES", None, "--series: the baseline series; default the verl's ref or release", blank=True
)
STACK: Var[str | None] = Var(
    "HARNESS_STACK", None, "--stack: harness or verl (verl's own uv.lock); default harness", blank=True
)
STACK_PYTHON: Var[str | None] = Var(
    "HARNESS_STACK_PYTHON", None, "the Python a verl stack's environment is made with (uv's --python: a path or a "
    "version); default uv's for the lock's requires-python"
)  # fmt: skip
VERL_URL: Var[str | None] = Var(
    "HARNESS_VERL_URL", None, "the public repository a CI job's verl checkout came from, in reproduce commands; "
    "default the repository or checkout itself"
)  # fmt: skip

# where the harness keeps things between runs
CACHE_DIR = Var(
    "HARNESS_CACHE_DIR", Path("~/.cache/verl-msprobe-harness"), "the harness's cache (target environments, "
    "repository mirrors); default ~/.cache/verl-msprobe-harness", kind=Path
)  # fmt: skip
ASSET_CACHE = Var(
    "HARNESS_ASSET_CACHE", Path("~/.cache/verl-msprobe-harness/assets"), "the verl_cpu workload's tiny model and "
    "data; default ~/.cache/verl-msprobe-harness/assets", kind=Path
)  # fmt: skip
SLOT_DIR = Var(
    "HARNESS_SLOT_DIR", Path("~/.cache/verl-msprobe-harness/slots"), "the host-wide slot locks of heavy trainings; "
    "default ~/.cache/verl-msprobe-harness/slots", kind=Path
)  # fmt: skip

# how a session runs and decides
HEAVY = Var(
    "HARNESS_HEAVY", False, "1: pytest, harness run, compare, duet and bisect run the scenarios marked heavy "
    "(--harness-heavy, --heavy); default off", One
)  # fmt: skip
HEAVY_SLOTS: Var[int | None] = Var(
    "HARNESS_HEAVY_SLOTS", None, "heavy trainings at once on this host; default as many as memory and cores allow",
    int, "not a whole number of slots (unset it for as many as the host affords)"
)  # fmt: skip
TIMING: Var[str | None] = Var(
    "HARNESS_TIMING", None, "--timing: gate (an overhead over its max fails) or record (decided, never failing); "
    "default gate"
)  # fmt: skip
NUMERICS: Var[str | None] = Var(
    "HARNESS_NUMERICS", None, "--engine: who computes the numerics' statistics, harness or msprobe; default harness"
)
ACCEPT: Var[str | None] = Var(
    "HARNESS_ACCEPT", None, "compare --accept: the reason head's regressions are an intended change; default none"
)
LOCK_WAIT_S = Var(
    "HARNESS_LOCK_WAIT_S", 3600.0, "seconds a run waits for another holding its results dir; default 3600",
    Seconds, "not a number of seconds"
)  # fmt: skip
MAX_DUMP: Var[str | None] = Var(
    "HARNESS_MAX_DUMP", None, "--max-dump: the runner's cap on one run's dumps (a size), whatever the scenario says; "
    "default none"
)  # fmt: skip
MIN_FREE: Var[str | None] = Var(
    "HARNESS_MIN_FREE", None, "--min-free: free space the results filesystem must keep (a size); default 1GB"
)
MAX_TRAINING_S: Var[float | None] = Var(
    "HARNESS_MAX_TRAINING_S", None, "the job's cap on any one training, in seconds (a workflow sets it); default none",
    PositiveSeconds, "expected a positive number of seconds"
)  # fmt: skip
DEADLINE: Var[float | None] = Var(
    "HARNESS_DEADLINE", None, "the epoch second the job's step ends (python3 -m harness.job run --minutes sets it); "
    "default none", PositiveSeconds, "expected a positive number of seconds"
)  # fmt: skip
JOB_IMAGE: Var[str | None] = Var(
    "HARNESS_IMAGE", None, "the container image the harness itself runs inside (a CI job's container: the workflow "
    "names it), recorded with each local run with a fingerprint of what it holds; default none"
)
RAY_ADDRESS: Var[str | None] = Var(
    "HARNESS_RAY_ADDRESS", None, "--ray-address: a Ray cluster's dashboard, http://HEAD:8265, for every scenario; "
    "default the scenario's executor.ray.address"
)  # fmt: skip

# TEST ONLY (harness.training.workloads.fault_injection, harness.training.executors.ray_entry): never set otherwise
DUMP_DELAY_S = Var(
    "HARNESS_TEST_DUMP_DELAY_S", 0.0, "TEST ONLY: seconds msprobe sleeps in every dumped call; default 0",
    Share, "not a number of seconds"
)  # fmt: skip
DUMP_PAD = Var(
    "HARNESS_TEST_DUMP_PAD", 0, "TEST ONLY: extra copies of each dump file per profiled step; default 0",
    int, "not a whole number of copies"
)  # fmt: skip
STAGE_SLOWDOWN_PCT = Var(
    "HARNESS_TEST_STAGE_SLOWDOWN_PCT", 0.0, "TEST ONLY: % of each profiled stage's time burnt in CPU; default 0",
    Share, "not a number (a percentage)"
)  # fmt: skip
STAGE_WAIT_PCT = Var(
    "HARNESS_TEST_STAGE_WAIT_PCT", 0.0, "TEST ONLY: % of each profiled stage's time slept; default 0",
    Share, "not a number (a percentage)"
)  # fmt: skip
GATHER_GATE: Var[str | None] = Var(
    "HARNESS_TEST_GATHER_GATE", None, "TEST ONLY: a ray job waits for this file before gathering; default none"
)
FAULTS = (DUMP_DELAY_S, DUMP_PAD, STAGE_SLOWDOWN_PCT, STAGE_WAIT_PCT)  # passed to the "on" run when set

# where a job runs (GitHub Actions' and Docker's own variables, read as the harness's settings)
RUNNER_NAME: Var[str | None] = Var(
    "RUNNER_NAME", None, "the runner's name in results.json and the history; default the host's name"
)
GITHUB_SHA: Var[str | None] = Var(
    "GITHUB_SHA", None, "the harness's commit where its checkout has no .git; the commit_sha of a RayJob the "
    "rayjob executor submits where the verl under test has no commit; default none"
)  # fmt: skip
GITHUB_SERVER_URL: Var[str | None] = Var(
    "GITHUB_SERVER_URL", None, "the GitHub a night's Actions run is on (its link in the history); default none"
)
GITHUB_REPOSITORY: Var[str | None] = Var(
    "GITHUB_REPOSITORY", None, "the repository of a night's Actions run (its link in the history; a RayJob's "
    "payload); default none"
)  # fmt: skip
GITHUB_RUN_ID: Var[str | None] = Var(
    "GITHUB_RUN_ID", None, "a night's Actions run (its link in the history: all three set, or none); the rayjob "
    "executor's own run id of each RayJob starts with it (RUN_ID-XXXXXX; default local-XXXXXX); default none"
)  # fmt: skip
GITHUB_RUN_ATTEMPT: Var[str] = Var(
    "GITHUB_RUN_ATTEMPT", "1", "the attempt of that run, in a RayJob's payload and its deletion; default 1"
)
GITHUB_REF_NAME: Var[str] = Var(
    "GITHUB_REF_NAME", "local", "the branch in a RayJob's payload (verl's submit script sends it); default local"
)
SUBMITTER_URL: Var[str | None] = Var(
    "SUBMITTER_URL", None, "verl's RayJob submitter service (its multi-node nightly's variable) for executor "
    "rayjob; default the scenario's executor.rayjob.url"
)  # fmt: skip
IMAGE: Var[str | None] = Var(
    "IMAGE", None, "the image of every pod of a RayJob the rayjob executor submits (verl's multi-node nightly's "
    "variable); default the scenario's executor.rayjob.image"
)  # fmt: skip
DOCKER_HOST: Var[str | None] = Var(
    "DOCKER_HOST", None, "the Docker daemon the docker executor uses; default unix:///var/run/docker.sock"
)

VARIABLES: tuple[Var[Any], ...] = tuple(v for v in tuple(globals().values()) if isinstance(v, Var))
