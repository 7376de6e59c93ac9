"""Baselines: every measured figure per scenario, the environment it was measured in, and tolerances.

A baseline is what the nightly job measured; the PR gate (``harness.gate``) compares a fresh run against
it. ``merge`` folds one or more results directories into a baseline; ``calibrate`` does the same from N
repeated runs and derives a tolerance per gated metric in the spirit of Megatron-LM's golden values:

    tolerance = max(k x largest relative deviation of a run from the mean, floor)

with ``k`` and ``floor`` per metric family (overhead ratios, disk bytes, dump structure). Tolerances are
relative and multiplicative (0.25: a regression above x1.25, an improvement below /1.25) and are stored
with the baseline, so the gate needs nothing else.
"""

from __future__ import annotations

import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, FiniteFloat, PositiveInt

from harness import config
from harness.artifacts.figures import (
    FIRST_PROFILED,
    check_figures,
    family,
    overhead,
    overhead_stage,
    parse,
    samples_of,
)
from harness.errors import BaselineError
from harness.gate.observe import Observation, observe_dir
from harness.gate.structure import Structure
from harness.safeio import MB, InputError, Versioned

# Environment keys that make two measurements incomparable: the gate reports them instead of comparing. The
# series is the verl ref a baseline follows (main, a release): a release baseline says nothing about main.
BLOCKING_ENV = ("device_kind", "mindstudio-probe", "series")
# Environment keys that make step times, and so the overhead ratios, incomparable, but not what was dumped: where
# one differs the gate leaves overhead out (saying so) and compares dump structure, disk and checks exactly. A
# nightly on GitHub's hosted runners lands on one of several CPU models from night to night.
OVERHEAD_ENV = ("cpu_model",)
# Environment keys shown next to the baseline (differences are reported, figures still compared); ``target`` is
# the verl identity (commit, dirty hash), which moves every night within a series.
INFO_ENV = (
    "verl",
    "target",
    "verl_dirty",
    "torch",
    "torch_npu",
    "transformers",
    "python",
    "image",
    "executor",
    "packages_dir",
)
# A noise multiplier, a tolerance, a floor, a count: finite and not below 0 (a tolerance of -0.5 once made
# identical figures REGRESSED; a NaN one made every figure INCONCLUSIVE).
Amount = Annotated[FiniteFloat, Field(ge=0)]


class ToleranceRule(BaseModel):
    """How calibration turns observed noise into a tolerance for one metric family (a baseline's ``policy``, by
    family: the judge's policies are ``harness.gate.judge.Policy``)."""

    model_config = ConfigDict(extra="forbid")
    k: Amount
    floor: Amount


# Overhead: k=0, the floor is the point of indifference (x1.075) between no change, which must pass, and the
# change the gate is sized to catch, the floor twice over (x1.156; ``stats.against_tolerance``). The noise is not
# folded into the tolerance any more: every overhead verdict is an interval from the per-step, per-rank samples
# (``harness.checks.stats``), INCONCLUSIVE rather than wrong when the noise is wider than the change. Disk and
# structure: a handful of calibration runs underestimates the spread (for n=3 the largest deviation from the mean is
# about 0.9 sigma, a new run deviates from that mean by ~1.15 sigma), so k ~ 3; dump bytes barely move (floor 5 %); the
# structure of a deterministic training does not move at all, so any change in it is a finding.
DEFAULT_RULES: dict[str, ToleranceRule] = {
    "overhead": ToleranceRule(k=0.0, floor=0.075),
    "disk": ToleranceRule(k=3.0, floor=0.05),
    "structure": ToleranceRule(k=1.0, floor=0.0),
}

# A stage's ratio (overhead.wall.stage.<stage>) is one stage of a step, the log-prob stages a fraction of a second:
# its runs scatter twice as wide as the step's (6 runs a side of an unchanged tiny_fsdp_l1 head, quiet 2-core
# machine, intervals at 99.9 %: actor_compute_log_prob ±30 %, ref_compute_log_prob ±26 %, actor_update ±22 %,
# the profiled step ±17 %), so at the step's 7.5 % two unchanged heads in two stayed INCONCLUSIVE at the cap (4 and
# 6 a side) while the step decided ok; at 15 % both decide ok at 4 a side (replayed on their runs). Sized to catch
# x1.32 in one stage; the profiled step, what users pay, keeps the family's floor.
STAGE_FLOOR = 0.15
# overhead.unprofiled is the one overhead ratio across two processes (a profiled step is divided by unprofiled steps
# of its own run, ``checks.overhead.in_run``; an unprofiled step has only the off run to be divided by), and two
# processes on the shared 2-core runner differ by 14 % run to run (8 interleaved rounds, one core kept busy):
# a 7.5 % tolerance could never be decided in the few repeats a gate can afford. It is sized to catch x1.56
# (debugger work left on outside the profiled steps), never lower than its family's floor.
# The first profiled step (the history's figure of msprobe's set-up, ``artifacts.figures.FIRST_PROFILED``): one step's
# samples, a one-time cost that scatters as a stage does: a stage's tolerance.
METRIC_FLOOR: dict[str, float] = {overhead("unprofiled"): 0.25, FIRST_PROFILED: STAGE_FLOOR}


def floor(metric: str, policy: dict[str, ToleranceRule] | None = None) -> float:
    """The smallest tolerance of ``metric``: its family's floor (``policy`` over the defaults) or its own."""
    fam = family(metric) or "structure"
    own = METRIC_FLOOR.get(metric, STAGE_FLOOR if metric.startswith(overhead_stage("")) else 0.0)
    return max(((policy or {}).get(fam) or DEFAULT_RULES[fam]).floor, own)


class StructureEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entries: Amount
    names: dict[str, Annotated[int, Field(ge=0)]]
    unstable: list[str] = Field(default_factory=list, description="names whose count varied between runs")


class ScenarioBaseline(BaseModel):
    model_config = ConfigDict(extra="forbid")
    settings: dict[str, Any]
    environment: dict[str, Any]
    runs: PositiveInt
    figures: Annotated[dict[str, float | int | str], AfterValidator(check_figures)]
    samples: dict[str, list[Amount]] = Field(default_factory=dict, description="gated metrics, one value per run")
    ratio_samples: dict[str, list[dict[str, Annotated[FiniteFloat, Field(gt=0)]]]] = Field(
        default_factory=dict,
        description="overhead metric -> per run, its on/off ratio per step and rank (step<N>.rank<R>): what the gate's "
        "interval is made of",
    )
    tolerances: dict[str, Amount] = Field(default_factory=dict, description="gated metric -> relative tolerance")
    structure: dict[str, StructureEntry] | None = None


class Baseline(Versioned):
    """baseline.json. Schema 1 (no ``schema_version``: harnesses before schema versions) said ``format: 1``."""

    FILE = "baseline.json"
    REDO = "re-run calibrate (or baseline merge) with this harness, or gate with the harness that wrote it"
    schema_version: Literal[2] = 2
    created: str
    commit: str | None = None
    environment: dict[str, Any]
    policy: dict[str, ToleranceRule]
    scenarios: dict[str, ScenarioBaseline]

    @classmethod
    def upgrade(cls, doc: dict[str, Any]) -> dict[str, Any]:
        if (said := doc.get("format", 1)) != 1:
            raise InputError(f"baseline.json of schema 1 with format {said!r} (it had format 1 only): {cls.REDO}")
        return {k: v for k, v in doc.items() if k != "format"}

    def tolerance(self, scenario: str, metric: str) -> float:
        """The stored tolerance; the family's floor for a metric the baseline has no tolerance for."""
        sb = self.scenarios.get(scenario)
        if sb is not None and metric in sb.tolerances:
            return sb.tolerances[metric]
        return floor(metric, self.policy)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        super().write(path)

    @classmethod
    def read(cls, path: Path) -> Baseline:
        """``path`` as a baseline; BaselineError in one line (the file, what is wrong, what to do) otherwise."""
        try:
            return cls.read_file(Path(path), 256 * MB)
        except InputError as exc:
            raise BaselineError(f"{path}: {exc}") from None


def git_commit(cwd: Path | None = None) -> str | None:
    """HEAD of the checkout the harness runs from (CI sets GITHUB_SHA when there is no .git)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return config.GITHUB_SHA.get()


def max_rel_deviation(values: list[float]) -> float:
    """Largest |v - mean| / |mean|; 0 for identical values, 1 when the mean is 0 but the values are not."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    spread = max(abs(v - mean) for v in values)
    if spread == 0:
        return 0.0
    return spread / abs(mean) if mean else 1.0


def tolerance_for(values: list[float], policy: ToleranceRule) -> float:
    return round(max(policy.k * max_rel_deviation(values), policy.floor), 4)


def _merge_structure(structs: list[Structure]) -> dict[str, StructureEntry]:
    out: dict[str, StructureEntry] = {}
    for k in sorted({k for s in structs for k in s}):
        present = [s[k] for s in structs if k in s]
        names = present[0]["names"]
        all_names = {n for p in present for n in p["names"]}
        unstable = sorted(
            n for n in all_names if len(present) < len(structs) or len({p["names"].get(n, 0) for p in present}) > 1
        )
        out[k] = StructureEntry(
            entries=statistics.fmean(p["entries"] for p in present), names=dict(names), unstable=unstable
        )
    return out


def _check_consistent(name: str, obs: list[Observation]) -> None:
    first = obs[0]
    for o in obs[1:]:
        for key in BLOCKING_ENV:
            if key in first.environment and o.environment.get(key) != first.environment.get(key):
                raise BaselineError(
                    f"{name}: runs from different environments cannot be merged: {key} "
                    f"{first.environment.get(key)!r} ({first.source}) vs {o.environment.get(key)!r} ({o.source})"
                )
        if o.settings != first.settings:
            raise BaselineError(f"{name}: scenario settings differ between {first.source} and {o.source}")


def _check_distinct(name: str, obs: list[Observation]) -> None:
    """Each observation its own trainings: a results dir given twice, or a copy of one, is one run, not two
    (calibration would read no noise into the tolerances, and the baseline claim runs it never had)."""
    seen: dict[str, Observation] = {}
    for o in obs:
        if o.trainings and (first := seen.setdefault(o.trainings, o)) is not o:
            raise BaselineError(f"{name}: {first.source} and {o.source} hold the same trainings (a copy): one run")


def build(
    dirs: list[Path],
    policy: dict[str, ToleranceRule] | None = None,
    calibrate: bool = False,
    previous: Baseline | None = None,
) -> Baseline:
    """Merge results directories into a baseline.

    Figures are the mean over the runs that hold them. With ``calibrate`` every gated metric gets
    ``max(k x max relative deviation, floor)``; without, tolerances come from ``previous`` (a calibrated
    baseline whose tolerances the nightly job carries forward) or else the family's floor."""
    policy = {**DEFAULT_RULES, **(policy or {})}
    per_scenario: dict[str, list[Observation]] = {}
    for d in dirs:
        for name, o in observe_dir(d).items():
            if o.errors or o.crashes:
                raise BaselineError(f"{name} in {d}: " + "; ".join(o.errors + o.crashes))
            per_scenario.setdefault(name, []).append(o)
    if not per_scenario:
        raise BaselineError(f"no results.json under {', '.join(map(str, dirs))}")
    scenarios: dict[str, ScenarioBaseline] = {}
    for name, obs in sorted(per_scenario.items()):
        _check_consistent(name, obs)
        _check_distinct(name, obs)
        if calibrate and len(obs) < 2:
            raise BaselineError(f"{name}: calibration needs at least 2 runs, found {len(obs)}")
        figures: dict[str, float | int | str] = {}
        samples: dict[str, list[float]] = {}
        ratio_samples = {
            m: runs
            for m in sorted({m for o in obs for m in o.gated() if family(m) == "overhead"})
            if all(runs := [samples_of(m, o.figures) for o in obs])
        }
        for metric in sorted({m for o in obs for m in o.figures if parse(m).kind != "overhead.sample"}):
            values = [o.figures[metric] for o in obs if metric in o.figures]
            numbers: list[float] = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
            figures[metric] = round(statistics.fmean(numbers), 6) if len(numbers) == len(values) else values[0]
            if family(metric) and len(numbers) == len(values):
                samples[metric] = numbers
        tolerances: dict[str, float] = {}
        for metric, sample in samples.items():
            fam = family(metric)
            assert fam is not None
            if calibrate:
                tolerances[metric] = max(tolerance_for(sample, policy[fam]), floor(metric, policy))
            elif previous is not None and name in previous.scenarios and metric in previous.scenarios[name].tolerances:
                tolerances[metric] = previous.scenarios[name].tolerances[metric]
            else:
                tolerances[metric] = floor(metric, policy)
        structs = [o.structure for o in obs if o.structure is not None]
        scenarios[name] = ScenarioBaseline(
            settings=obs[0].settings,
            environment=obs[0].environment,
            runs=len(obs),
            figures=figures,
            samples=samples if len(obs) > 1 else {},
            ratio_samples=ratio_samples,
            tolerances=tolerances,
            structure=_merge_structure(structs) if structs else None,
        )
    first_env = next(iter(scenarios.values())).environment
    common = {k: v for k, v in first_env.items() if all(s.environment.get(k) == v for s in scenarios.values())}
    return Baseline(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        commit=git_commit(),
        environment=common,
        policy=policy,
        scenarios=scenarios,
    )
