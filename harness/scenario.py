"""The scenario file format: pydantic models, validated strictly (``extra="forbid"``).

A scenario says what to train (workload, engine, model, world size, steps), how precision_debugger is
configured, what the dumps must look like, and the budgets. Workload and executor options are
discriminated unions whose members live with their workloads and executors (see their registries).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import ByteSize, ConfigDict, Field, PositiveFloat, PositiveInt, PrivateAttr, model_validator

from harness.executors.settings import ExecutorSettings
from harness.stages import Stage
from harness.strict import Strict
from harness.workloads.settings import WorkloadSettings


def _unique(values: list) -> list:
    if len(set(values)) != len(values):
        raise ValueError(f"values must be unique, got {values}")
    return values


class PrecisionDebuggerSettings(Strict):
    """msprobe's config.json plus verl's tool settings (stages, strict) and the profiled global steps."""

    task: Literal["statistics", "tensor"]
    level: Literal["L0", "L1", "mix"]
    summary_mode: Literal["statistics", "md5"] = "statistics"
    steps: Annotated[list[PositiveInt], Field(min_length=1, description="profiled global steps (from 1)")]
    stages: Annotated[list[Stage], Field(min_length=1)]
    ranks: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, description="msprobe rank filter; [] = all")
    data_mode: list[Literal["all", "forward", "backward", "input", "output"]] = Field(default_factory=lambda: ["all"])
    scope: list[str] = Field(default_factory=list)
    list_: list[str] = Field(default_factory=list, alias="list", description="msprobe API/module name filter")
    extra_info: bool = True
    async_dump: bool = False
    strict: bool = False

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> PrecisionDebuggerSettings:
        _unique(self.steps)
        _unique(self.stages)
        if self.summary_mode != "statistics" and self.task != "statistics":
            raise ValueError("summary_mode applies to task 'statistics' only")
        return self


class KnownGap(Strict):
    """Expected stages that are known to produce no dumps: reported as a strict xfail."""

    stages: Annotated[list[Stage], Field(min_length=1)]
    reason: Annotated[str, Field(min_length=1)]


class Expectations(Strict):
    """What the dump tree must hold. Unset lists default from precision_debugger and world_size."""

    stages: list[Stage] | None = None
    ranks: list[Annotated[int, Field(ge=0)]] | None = None
    steps: list[PositiveInt] | None = None
    min_entries: Annotated[int, Field(ge=0)] = 1
    max_entries: PositiveInt | None = None
    required_patterns: dict[Stage, list[str]] = Field(
        default_factory=dict, description="per stage, regexes that must each match at least one entry name"
    )
    nonfinite_ok: list[str] = Field(
        default_factory=list,
        description="regexes of entry names whose statistics may be NaN/Inf (reported, not failed), e.g. FSDP2's "
        "uninitialised all-gather buffer as seen by Tensor.narrow",
    )
    known_gaps: list[KnownGap] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> Expectations:
        named = [(f"required_patterns.{st}", p) for st, ps in self.required_patterns.items() for p in ps]
        for where, p in [*named, *(("nonfinite_ok", p) for p in self.nonfinite_ok)]:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"{where}: {p!r} is not a valid regex ({exc})") from exc
        return self


class OverheadBudget(Strict):
    """Step time with precision_debugger on / off, at the same global step number."""

    statistic: Literal["median", "mean", "max"] = "median"
    warmup_steps: Annotated[
        int, Field(ge=0, description="first steps reported but not judged (allocation, caches)")
    ] = 1
    max_profiled_ratio: PositiveFloat
    max_unprofiled_ratio: PositiveFloat
    max_stage_ratio: dict[Stage, PositiveFloat] = Field(default_factory=dict)


class DiskBudget(Strict):
    """Dump bytes; sizes accept units ("12MB", "1.5GiB"). Unset = not limited."""

    max_total: ByteSize | None = None
    max_per_step: ByteSize | None = None
    max_per_stage: ByteSize | None = Field(None, description="one stage of one step, all ranks")
    max_per_rank: ByteSize | None = Field(None, description="one rank over the whole run")


class Budgets(Strict):
    overhead: OverheadBudget
    disk: DiskBudget = DiskBudget()


class Scenario(Strict):
    """One scenario file. Its name is the file's stem (set by the loader), so ``-k NAME`` selects it."""

    description: str = ""
    device: Literal["cpu", "npu", "cuda"] = "cpu"
    engine: Literal["fsdp", "megatron"]
    world_size: PositiveInt
    steps: Annotated[PositiveInt, Field(description="total training steps")]
    workload: WorkloadSettings
    precision_debugger: PrecisionDebuggerSettings
    expect: Expectations = Expectations()
    budgets: Budgets
    executor: ExecutorSettings = Field(default_factory=lambda: ExecutorSettings())
    _name: str = PrivateAttr("scenario")

    @property
    def name(self) -> str:
        return self._name

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
        if bad := [r for r in pd.ranks + (self.expect.ranks or []) if r >= self.world_size]:
            raise ValueError(f"ranks {bad} do not exist with world_size {self.world_size}")
        if bad := [s for s in self.expect.steps or [] if s not in pd.steps]:
            raise ValueError(f"expect.steps {bad} are not profiled (precision_debugger.steps)")
        gaps = {s for g in self.expect.known_gaps for s in g.stages}
        if bad := sorted(gaps - set(self.expected_stages)):
            raise ValueError(f"expect.known_gaps names stages {bad} that are not expected")
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
