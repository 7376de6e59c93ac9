"""The scenario file format: pydantic models, validated strictly (``extra="forbid"``).

A scenario says what to train (workload, engine, model, world size, steps), how precision_debugger is
configured, what the dumps must look like, and the budgets. The workload and executor blocks are derived
from their registry (``harness.scenario.settings``): a workload's settings model is a member of the ``workload``
union (tagged by ``kind``), an executor's options are a block named after it under ``executor``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, PositiveInt, PrivateAttr, create_model, model_validator

from harness.scenario.blocks import (
    Budgets,
    ExecutorOptions,
    ExecutorSettingsBase,
    Expectations,
    PrecisionDebuggerSettings,
)
from harness.scenario.settings import EXECUTORS, WORKLOADS
from harness.strict import Strict

if TYPE_CHECKING:  # what a type checker sees; pydantic gets the unions built from the registry below
    WorkloadSettings = Any
    ExecutorSettings = ExecutorSettingsBase
else:
    WorkloadSettings = Annotated[
        Union[tuple(WORKLOADS.values())],  # noqa: UP007  # built at run time
        Field(discriminator="kind"),
    ]
    ExecutorSettings = create_model(
        "ExecutorSettings",
        __base__=ExecutorSettingsBase,
        __doc__="Where the trainings run: an executor (kind) and its options, in a block named after it.",
        kind=(Literal[tuple(EXECUTORS)], "local"),
        **{name: (block, block()) for name, block in EXECUTORS.items() if block},
    )

MAX_STEPS = 10_000  # a regression scenario trains a handful of steps; more is a typo (and a list that size)
MAX_WORLD_SIZE = 4096


class Scenario(Strict):
    """One scenario file. Its name is the file's stem (set by the loader), so ``-k NAME`` selects it."""

    description: str = ""
    device: Literal["cpu", "npu", "cuda"] = "cpu"
    engine: Literal["fsdp", "megatron"]
    world_size: Annotated[PositiveInt, Field(le=MAX_WORLD_SIZE)]
    steps: Annotated[PositiveInt, Field(le=MAX_STEPS, description="total training steps")]
    workload: WorkloadSettings
    precision_debugger: PrecisionDebuggerSettings
    expect: Expectations = Expectations()
    budgets: Budgets
    executor: ExecutorSettings = Field(default_factory=lambda: ExecutorSettings())
    heavy: bool = Field(
        False,
        description="pytest and `harness run` skip it, saying so, unless --harness-heavy / --heavy (or "
        "HARNESS_HEAVY=1): "
        "trainings of several minutes that the everyday run (.ci/run) leaves out",
    )
    _name: str = PrivateAttr("scenario")
    _digest: str | None = PrivateAttr(None)

    @property
    def name(self) -> str:
        return self._name

    @property
    def digest(self) -> str | None:
        """The sha256 of the file it was loaded from (None: not loaded from a file)."""
        return self._digest

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        pd = self.precision_debugger
        if bad := [s for s in pd.steps if s > self.steps]:
            raise ValueError(f"precision_debugger.steps {bad} beyond the {self.steps} training steps")
        warm = self.budgets.overhead.warmup_steps
        if not [n for n in self.unprofiled_steps if n > warm]:
            raise ValueError(f"no unprofiled step after the {warm} warmup step(s): the overhead check needs one")
        if not [n for n in pd.steps if n > warm]:
            raise ValueError(f"every profiled step is a warmup step (budgets.overhead.warmup_steps {warm})")
        if bad := [
            r for r in pd.ranks + (self.expect.ranks or []) + (pd.finish_hook_ranks or []) if r >= self.world_size
        ]:
            raise ValueError(f"ranks {bad} do not exist with world_size {self.world_size}")
        if bad := [s for s in self.expect.steps or [] if s not in pd.steps]:
            raise ValueError(f"expect.steps {bad} are not profiled (precision_debugger.steps)")
        gaps: set[str] = {s for g in self.expect.known_gaps for s in g.stages}
        if unexpected := sorted(gaps - set(self.expected_stages)):
            raise ValueError(f"expect.known_gaps names stages {unexpected} that are not expected")
        if unexpected := sorted(set(self.expect.required_patterns) - set(self.expected_stages)):
            raise ValueError(f"expect.required_patterns names stages {unexpected} that are not expected")
        for kind in EXECUTORS:  # every options block, used or not: `--executor docker` may pick one up
            opts = self.executor.options(kind)
            if isinstance(opts, ExecutorOptions) and (why := opts.refusal(f"executor.{kind}", self.device)):
                raise ValueError(why)
        self.workload.check_scenario(self)
        return self

    @property
    def expected_stages(self) -> list[str]:
        return list(self.expect.stages if self.expect.stages is not None else self.precision_debugger.stages)

    @property
    def expected_ranks(self) -> list[int]:
        if self.expect.ranks is not None:
            return list(self.expect.ranks)
        return list(self.precision_debugger.ranks or range(self.world_size))

    @property
    def expected_steps(self) -> list[int]:
        return sorted(self.expect.steps or self.precision_debugger.steps)

    @property
    def gap_stages(self) -> set[str]:
        return {s for g in self.expect.known_gaps for s in g.stages}

    @property
    def unprofiled_steps(self) -> list[int]:
        return [s for s in range(1, self.steps + 1) if s not in self.precision_debugger.steps]
