"""The blocks of a scenario that do not depend on which workloads and executors exist.

They sit below the workloads and executors (which read them) and below the scenario model (which the
registries complete with each workload's and executor's own settings). ``ScenarioView`` is what a workload
sees of a scenario, so that workloads never import the model built from them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import ByteSize, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from harness.scenario.stages import Stage
from harness.strict import Strict


def _unique(values: list) -> list:
    if len(set(values)) != len(values):
        raise ValueError(f"values must be unique, got {values}")
    return values


DataMode = Literal["all", "forward", "backward", "input", "output"]


class PrecisionDebuggerSettings(Strict):
    """msprobe's config.json plus verl's tool settings (stages, strict) and the profiled global steps."""

    task: Literal["statistics", "tensor"]
    level: Literal["L0", "L1", "mix"]
    summary_mode: Literal["statistics", "md5"] = "statistics"
    steps: Annotated[list[PositiveInt], Field(min_length=1, description="profiled global steps (from 1)")]
    stages: Annotated[list[Stage], Field(min_length=1)]
    ranks: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, description="msprobe rank filter; [] = all")
    data_mode: list[DataMode] = Field(default_factory=lambda: list[DataMode](["all"]))
    scope: list[str] = Field(default_factory=list)
    list_: list[str] = Field(default_factory=list, alias="list", description="msprobe API/module name filter")
    extra_info: bool = True
    async_dump: bool = False
    strict: bool = False
    finish_hook_ranks: list[Annotated[int, Field(ge=0)]] | None = Field(
        None,
        description="verl's finish_hook_cmd (verl #7408, 0.9.1), run once after the last profiled step on these ranks "
        "(global_profiler.finish_hook_ranks; one rank a node ships that node's save_path): the harness's own command, "
        "which records every file of the node's save_path, its size and sha256; layout then checks it ran once on "
        "each, after the last profiled step, and listed what the node held (docs/several-nodes.md). Unset: no hook",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> PrecisionDebuggerSettings:
        _unique(self.steps)
        _unique(self.stages)
        if self.finish_hook_ranks is not None:
            if not self.finish_hook_ranks:
                raise ValueError("finish_hook_ranks [] selects no rank: name the ranks (one a node), or leave it out")
            _unique(self.finish_hook_ranks)
        if self.summary_mode != "statistics" and self.task != "statistics":
            raise ValueError("summary_mode applies to task 'statistics' only")
        return self


class KnownGap(Strict):
    """Expected stages that are known to produce no dumps: reported as a strict xfail."""

    stages: Annotated[list[Stage], Field(min_length=1)]
    reason: Annotated[str, Field(min_length=1)]


class KnownBug(Strict):
    """A crash of the code under test that is known (and reported upstream): while a training fails with an
    exception matching ``raises``, the crash check is a strict xfail; the day it no longer does, it fails (XPASS),
    so the declaration goes when the bug does."""

    party: Literal["verl", "msprobe"] = "verl"
    raises: Annotated[
        str,
        Field(min_length=1, description="regex searched in the crash's exception line, e.g. '^ValueError: Unknown'"),
    ]
    reason: Annotated[str, Field(min_length=1)]


class NumericsScope(Strict):
    """What base against head's numerics compare reads, for dumps too big to compare whole every time."""

    steps: Literal["all", "first"] = Field(
        "all", description="every profiled step dumped on both sides, or the first only (later steps skipped)"
    )
    ranks: Literal["all"] | PositiveInt = Field(
        "all", description="every rank, or the first N rank dirs by number (the others skipped)"
    )


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
    known_bugs: list[KnownBug] = Field(default_factory=list)
    numerics_match: bool = Field(
        True,
        description="base against head: msprobe's compare of the two dump trees is judged (same seeds, same "
        "numbers); false where numerics are not expected to match (a nondeterministic kernel on an accelerator): "
        "its figures are reported, not judged",
    )
    numerics_scope: NumericsScope = Field(
        default_factory=NumericsScope,
        description="what base against head's numerics compare reads; the default skips nothing (every step and "
        "rank dumped on both sides), and the notes say what a narrower scope skipped",
    )
    nonzero_backward: bool = Field(
        False,
        description="each update stage's dump holds a backward tensor with a non-zero Norm: a zero reward or "
        "advantage makes every gradient 0, and such a dump cannot show a broken backward (statistics only)",
    )

    @model_validator(mode="after")
    def _check(self) -> Expectations:
        if self.max_entries is not None and self.min_entries > self.max_entries:
            raise ValueError(f"min_entries {self.min_entries} is above max_entries {self.max_entries}: none could pass")
        named = [(f"required_patterns.{st}", p) for st, ps in self.required_patterns.items() for p in ps]
        bugs = [(f"known_bugs.{i}.raises", b.raises) for i, b in enumerate(self.known_bugs)]
        for where, p in [*named, *(("nonfinite_ok", p) for p in self.nonfinite_ok), *bugs]:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"{where}: {p!r} is not a valid regex ({exc})") from exc
        return self


# An on/off step-time ratio's max: 1 or more (the debugger's work is never negative; a max of 0.5 could only ever
# fail), finite.
MaxRatio = Annotated[float, Field(ge=1, allow_inf_nan=False)]
# A dump budget: above 0 bytes (a budget of 0 fails every run that dumps at all; unset it for no limit).
Bytes = Annotated[ByteSize, Field(gt=0)]


class OverheadBudget(Strict):
    """Step time with precision_debugger on / off, at the same global step number."""

    warmup_steps: Annotated[
        int, Field(ge=0, description="first steps reported but not judged (allocation, caches)")
    ] = 1
    max_profiled_ratio: MaxRatio
    max_unprofiled_ratio: MaxRatio
    max_stage_ratio: dict[Stage, MaxRatio] = Field(default_factory=dict)
    compare: bool = Field(
        True,
        description="whether base against head (compare) decides this overhead; false where run-to-run noise leaves "
        "it undecided at any number of runs a pull request can afford (verl's real trainer on CPU: ±185 % to "
        ">999 % at 2-3 runs a side; verl's Ascend runners: one run a side in a 40-minute job): compare then runs base "
        "--repeats times and head once (no more pairs), each run the precision_debugger-on training alone (no off "
        "run: only the overhead ratios read one), decides structure, layout, contents, disk, numerics and crash, and "
        "says overhead NOT MEASURED; the nightlies judge it (the maxima above, across nights)",
    )

    quiet_run_s: float | None = Field(
        None,
        gt=0,
        description="seconds one run of a comparison (its trainings and checks) takes on a quiet runner of this tier, "
        "measured (2 cores, alone): a comparison says its runner's crowding as its runs' wall against it, and on a "
        "crowded runner (1.5x or more) adds pairs past its 20 minutes up to 4 runs a side, within the job's deadline "
        "(budgets in runs: what decides, not the minutes a crowded runner leaves); unset: neither",
    )

    def stage_limit(self, stage: str) -> float | None:
        return {str(k): v for k, v in self.max_stage_ratio.items()}.get(stage)


class DiskBudget(Strict):
    """Dump bytes; sizes accept units ("12MB", "1.5GiB"). Unset = not limited."""

    max_total: Bytes | None = None
    max_per_step: Bytes | None = None
    max_per_stage: Bytes | None = Field(None, description="one stage of one step, all ranks")
    max_per_rank: Bytes | None = Field(None, description="one rank over the whole run")
    max_per_node: Bytes | None = Field(
        None, description="one node's disk over the whole run, all its ranks (a run on a Ray cluster's nodes)"
    )


class Budgets(Strict):
    overhead: OverheadBudget
    disk: DiskBudget = DiskBudget()
    provisional: str = Field(
        "",
        max_length=300,
        pattern=r"^[^\n\r]*$",
        description="why these budgets are provisional (never measured on the scenario's device: derived from "
        "another's figures): the overhead and disk checks report every figure against them and gate none (not a "
        "pass, not a failure), until measured budgets replace them and this line goes",
    )


class ExecutorOptions(Strict):
    """An executor's options block (``executor.<name>:``). Settings that open the host to the training (``risks``)
    are refused unless the block says ``unsafe: true`` with an ``unsafe_reason``; the run then says so."""

    # a block of an executor that runs the trainings on a Ray cluster's nodes (its ``scratch`` is each run's dir
    # on every node): the workloads place their files there and the devices are the cluster's, not this host's
    on_cluster: ClassVar[bool] = False

    unsafe: bool = Field(False, description="run even with the risks this block's settings carry (needs a reason)")
    unsafe_reason: str = Field("", description="why the risks are needed: recorded and shown with every run")

    def risks(self, device: str | None = None) -> list[str]:
        """What these settings expose of the host, one phrase each (``device``: the scenario's, when known)."""
        return []

    def refusal(self, where: str, device: str | None = None) -> str | None:
        """The one-line reason these settings may not run, or None."""
        if self.unsafe and not self.unsafe_reason.strip():
            return f"{where}.unsafe: true needs {where}.unsafe_reason (why the risks are needed)"
        if (risks := self.risks(device)) and not self.unsafe:
            return f"{where}: refused, {'; '.join(risks)} (or set unsafe: true and unsafe_reason: WHY)"
        return None


class ExecutorSettingsBase(Strict):
    """Where a scenario's trainings run. The model in ``harness.scenario.model`` adds ``kind`` (one of the registered
    executors) and one options block per executor that has options, named after it (``docker:``)."""

    kind: str = "local"
    timeout_s: PositiveFloat = Field(900, description="per training run; the run is killed past it")

    def options(self, kind: str) -> Any:
        """The options block of executor ``kind`` (None for an executor without options)."""
        return getattr(self, kind, None)

    def cluster(self) -> Any:
        """The block of this scenario's executor where it runs the trainings on a Ray cluster's nodes (``ray``,
        ``rayjob``: it has ``scratch`` and ``env``), else None: the one test of "on a cluster" every layer asks."""
        block = self.options(self.kind)
        return block if getattr(block, "on_cluster", False) else None


class TinyQwen2(Strict):
    """A transformers Qwen2Config, randomly initialised: nothing is downloaded."""

    vocab_size: PositiveInt = 256
    hidden_size: PositiveInt = 128
    intermediate_size: PositiveInt = 512
    num_hidden_layers: PositiveInt = 3
    num_attention_heads: PositiveInt = 4
    num_key_value_heads: PositiveInt = 2
    max_position_embeddings: PositiveInt = 128


class ScenarioView(Protocol):
    """The scenario as workloads see it (``harness.scenario.model.Scenario`` satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def world_size(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def workload(self) -> Any: ...
    @property
    def precision_debugger(self) -> PrecisionDebuggerSettings: ...
    @property
    def executor(self) -> ExecutorSettingsBase: ...
    @property
    def expected_stages(self) -> list[str]: ...
