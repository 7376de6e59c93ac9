"""Observing results directories: each scenario's results.json, plus the structure of its dumps (from the facts its
judge stored beside the run: no dump is read again).

The one reader of results directories for the baseline, the gate and the reports. Anything unreadable is a
BaselineError naming the file, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.artifacts import figures as fig
from harness.artifacts.dumpfacts import DumpFacts
from harness.artifacts.figures import family
from harness.artifacts.results import PhaseDoc, ResultsDoc, read_results
from harness.artifacts.rundir import LINKED, ScenarioDir
from harness.errors import BaselineError
from harness.gate.structure import Structure, structure_of
from harness.safeio import InputError


@dataclass
class Observation:
    """One scenario of one results directory: what the gate and the baseline need from it."""

    scenario: str
    settings: dict[str, Any]
    environment: dict[str, Any]
    figures: dict[str, float | int | str]
    structure: Structure | None
    checks: dict[str, bool] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)  # failed checks' problems, for reports
    inconclusive: dict[str, list[str]] = field(default_factory=dict)  # what the noise left undecided, per check
    not_checked: set[str] = field(default_factory=set)  # checks with nothing to check: a training crashed
    crashes: list[str] = field(default_factory=list)  # the crash check's lines: verl or msprobe crashed a training
    # the scenario's declared known bug when a training crashed as declared (the crash check's xfail): no error, no
    # regression, and none of the other checks judged
    known_crash: str = ""
    errors: list[str] = field(default_factory=list)
    source: Path | None = None
    trainings: str = ""  # the runs block of results.json (argv, wall times): a copy of a results dir has the same
    phases: list[PhaseDoc] = field(default_factory=list)  # where the scenario's minutes went (results.json's)

    def gated(self) -> dict[str, float]:
        return {m: float(v) for m, v in self.figures.items() if family(m) and isinstance(v, int | float)}

    def parsed(self, kind: str) -> list[tuple[fig.Figure, float]]:
        """The numeric figures of one kind (``figures.parse``), e.g. every ``disk.step`` with its step."""
        out = [(fig.parse(m), v) for m, v in self.figures.items() if isinstance(v, int | float)]
        return [(f, float(v)) for f, v in out if f.kind == kind]


def device_kind(env: dict[str, Any]) -> str:
    """What a figure is comparable across: the device (a chip name where recorded) and the CPU architecture."""
    dev = env.get("device_name") or env.get("device") or "?"
    return f"{dev}/{env.get('machine') or '?'}"


def with_kind(env: dict[str, Any]) -> dict[str, Any]:
    return {**env, "device_kind": device_kind(env)}


def structure_figures(structure: Structure | None) -> dict[str, float | int | str]:
    return {fig.structure_entries(k): v["entries"] for k, v in (structure or {}).items()}


def observe_results(path: Path) -> Observation:
    """Read ``<results>/<scenario>/results.json`` and the structure of its dumps (when they are there)."""
    sdir = path.parent
    if linked := ScenarioDir(sdir).link():  # read in place: never another tree
        raise BaselineError(f"{linked}: {LINKED}")
    return observe_doc(read_results(path), sdir)


def observe_doc(doc: ResultsDoc, sdir: Path, facts: DumpFacts | None = None) -> Observation:
    """A scenario's results.json, read or about to be written (the session judges the baseline gate with the checks,
    before results.json is written once), and the structure of the dumps under its directory ``sdir``: from
    ``facts`` (the session's, as its read of the dumps found them), else those stored beside the run."""
    figures: dict[str, float | int | str] = {}
    checks: dict[str, bool] = {}
    problems: dict[str, list[str]] = {}
    inconclusive: dict[str, list[str]] = {}
    not_checked = {name for name, check in doc.checks.items() if check.not_checked}
    for name, check in doc.checks.items():
        checks[name] = check.passed
        figures.update(check.figures)
        if check.problems:
            problems[name] = list(check.problems)
        if check.inconclusive:
            inconclusive[name] = list(check.inconclusive)
    crash = doc.checks.get("crash")
    known = crash.xfail_reason if crash is not None and not crash.passed and crash.xfail_reason else ""
    crashes = [] if known else problems.get("crash", [])
    errors = [
        f"{mode} run exited with {r.exit_code}{' (timed out)' if r.timed_out else ''}"
        for mode, r in doc.runs.items()
        # a crash of verl or msprobe is a verdict (the crash check's), a declared one the scenario's xfail; a run the
        # monitor stopped at the dump cap, the disk check's failure (one stopped at the free-space floor never
        # gets here: an infrastructure error before any check)
        if r.exit_code != 0 and not r.stopped and not crashes and not known
    ]
    stopped = any(r.stopped for r in doc.runs.values())  # no step after the stop: no overhead figures either
    # an overhead check with nothing to measure says so (an on run alone: not measured), never a missing figure
    measured = "overhead" not in not_checked
    if fig.OVERHEAD_PROFILED not in figures and measured and not errors and not crashes and not known and not stopped:
        errors.append("no overhead figures in results.json (did the overhead check run?)")
    dumps = sdir / "on" / "dumps"
    try:
        structure = structure_of(dumps, facts) if dumps.is_dir() else None
    except InputError as exc:
        raise BaselineError(f"{ScenarioDir(sdir).run('on').dump_facts}: {exc}") from None
    figures.update(structure_figures(structure))
    return Observation(
        scenario=doc.scenario,
        settings=doc.settings,
        environment=with_kind(doc.environment),
        figures=figures,
        structure=structure,
        checks=checks,
        problems=problems,
        inconclusive=inconclusive,
        not_checked=not_checked,
        crashes=crashes,
        known_crash=known,
        errors=errors,
        source=sdir,
        trainings=json.dumps({m: r.model_dump() for m, r in doc.runs.items()}, sort_keys=True) if doc.runs else "",
        phases=list(doc.phases),
    )


def observe_dir(results: Path) -> dict[str, Observation]:
    """Every scenario with a results.json under a results directory."""
    results = Path(results)
    if not results.is_dir():
        raise BaselineError(f"no results directory {results}")
    return {o.scenario: o for o in (observe_results(p) for p in sorted(results.glob("*/results.json")))}
