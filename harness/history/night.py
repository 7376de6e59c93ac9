"""One night from a results dir: every scenario's figures and samples, the night's identity.

Read through the gate's one reader of results dirs (``gate.observe``), so a night holds what the gate and the reports
see. A scenario whose training crashed (verl or msprobe) or failed (the runner, the harness) is kept with its lines
and marked; it is no point of any overhead series. Each overhead figure carries its tolerance as the gate would judge
it (``gate.baseline.floor``), so a later ``history check`` judges every night's figure by the tolerance it was
appended with.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness import config, outcomes
from harness.artifacts.figures import family, parse, samples_of
from harness.artifacts.results import read_results
from harness.errors import BaselineError, HarnessError
from harness.gate.baseline import floor
from harness.gate.observe import Observation, observe_dir
from harness.history.duet import ALONE, DuetDoc
from harness.history.duet import record as duet_record
from harness.history.store import (
    DATE,
    WEB_URL,
    HistoryError,
    Identity,
    Night,
    RunStatus,
    ScenarioRun,
    first_apart,
)
from harness.outside import shown
from harness.targets.spec import git

# identity fields every scenario of one results dir must agree on: one night runs on one machine and one install
AGREED = ("verl", "verl_commit", "series", "msprobe", "torch", "device_kind", "processor", "image", "harness")


def source_digest(obs: Observation) -> str:
    """The scenario, its trainings (argv, exits, wall times) and its figures: the same for a copy of the dir, never
    for two runs."""
    figures = json.dumps(obs.figures, sort_keys=True)
    return hashlib.sha256(f"{obs.scenario}\n{obs.trainings}\n{figures}".encode()).hexdigest()[:16]


def scenario_run(obs: Observation) -> ScenarioRun:
    status: RunStatus = "crashed" if obs.crashes or obs.known_crash else "error" if obs.errors else "ok"
    why = obs.crashes or ([obs.known_crash] if obs.known_crash else obs.errors)
    numbers = {
        m: float(v)
        for m, v in obs.figures.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and parse(m).kind != "overhead.sample"
    }
    overhead = sorted(m for m in numbers if family(m) == "overhead")
    figures, samples, tolerances = first_apart(
        numbers, {m: s for m in overhead if (s := samples_of(m, obs.figures))}, {m: floor(m) for m in overhead}
    )
    return ScenarioRun(
        source=source_digest(obs), status=status, why=list(why), figures=figures, samples=samples, tolerances=tolerances
    )


def _processor(env: dict[str, Any]) -> str:
    """The NPU type where the device has a name of its own (Ascend), else the CPU model."""
    return str(env.get("device_name") or env.get("cpu_model") or "?")


def first_parent_position(commit: str, repo: Path) -> int:
    """How many commits verl's first-parent line holds up to ``commit``: its place on the x-axis of every series."""
    return int(str(git("rev-list", "--first-parent", "--count", commit, cwd=repo)))


def _position(commit: str | None, repo: Path | None, source: str | None) -> int | None:
    """The commit's position, from ``repo`` (``--verl-repo``) or else the target's own repository when it is a
    local one; None for a release."""
    if not commit:
        return None
    where = repo or (Path(source) if source and "://" not in source and Path(source).is_dir() else None)
    if where is None:
        return None
    try:
        return first_parent_position(commit, where)
    except HarnessError as exc:
        raise HistoryError(f"--verl-repo {where}: {exc} (the repository verl's commit {commit[:12]} is from)") from None


def identity_of(observations: dict[str, Observation], date: str, runner: str, verl_repo: Path | None) -> Identity:
    """The night's identity from its scenarios' environments; HistoryError naming the first field two scenarios
    disagree on."""
    fields: dict[str, dict[str, Any]] = {}
    for name, obs in sorted(observations.items()):
        env = obs.environment
        fields[name] = {
            "verl": str(env.get("verl") or "?"),
            "verl_commit": env.get("verl_commit"),
            "series": env.get("series"),
            "msprobe": env.get("mindstudio-probe"),
            "torch": env.get("torch"),
            "device_kind": str(env.get("device_kind") or "?"),
            "processor": _processor(env),
            "image": env.get("image"),
            "harness": env.get("harness"),
        }
    first_name, first = next(iter(fields.items()))
    for name, f in fields.items():
        if bad := next((k for k in AGREED if f[k] != first[k]), None):
            raise HistoryError(
                f"{name}: {bad} {shown(repr(f[bad]))} but {first_name}: {shown(repr(first[bad]))}: one night is one "
                "install on one machine (append each results dir to a history of its own)"
            )
    source = _source(observations[first_name])
    files = {name: str(d) for name, obs in observations.items() if (d := obs.environment.get("scenario_sha256"))}
    return Identity(
        date=date,
        runner=runner,
        verl_position=_position(first["verl_commit"], verl_repo, source),
        scenarios=files,
        **first,
    )


def _source(obs: Observation) -> str | None:
    """Where the target's verl came from (a repository path, for its first-parent position)."""
    assert obs.source is not None  # the target block is not part of an Observation
    doc = read_results(obs.source / "results.json")
    verl = (doc.target or {}).get("verl") or {}
    return verl.get("source") if isinstance(verl, dict) else None


def default_runner() -> str:
    """GitHub's runner name where a job runs, else the host's name."""
    return config.RUNNER_NAME.get() or platform.node() or "?"


def trained_on(observations: dict[str, Observation]) -> str:
    """The machines the night's trainings ran on (each results.json says: a nightly's scenario jobs may run on several
    runners of one label), not the one appending them (a history job on a hosted runner); results from before that
    was recorded: this machine's."""
    names = sorted({str(o.environment["runner"]) for o in observations.values() if o.environment.get("runner")})
    return ", ".join(names) if names else default_runner()


def web_url(text: str, option: str) -> str:
    """``text`` when it is an http(s) URL a page may link (``store.WEB_URL``), else HistoryError."""
    if not re.fullmatch(WEB_URL, text):
        raise HistoryError(f"{option} {shown(repr(text))}: not an http(s) URL")
    return text


def default_run() -> str | None:
    """The GitHub Actions run this night is appended in (its page), where one is."""
    server, repository, run = config.GITHUB_SERVER_URL.get(), config.GITHUB_REPOSITORY.get(), config.GITHUB_RUN_ID.get()
    return f"{server}/{repository}/actions/runs/{run}" if server and repository and run else None


def today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def night_of(
    results: Path,
    date: str | None = None,
    runner: str | None = None,
    verl_repo: Path | None = None,
    run: str | None = None,
    duet: Path | None = None,
) -> Night:
    """The night a results dir holds; HistoryError in one line when it holds none or cannot be read. ``run``: the
    CI run's page (default: this GitHub Actions run's, where there is one). ``duet``: the night's duet (``harness
    duet``'s results dir): its head runs are more runs of the night, its base runs and verdict its ``Duet``."""
    if run is not None:
        web_url(run, "--run-url")
    if date is not None and not re.match(DATE, date):
        raise HistoryError(f"--date {date!r}: not a day (YYYY-MM-DD)")
    try:
        observations = observe_dir(results)
    except BaselineError as exc:
        raise HistoryError(str(exc)) from None
    if not observations:
        raise HistoryError(f"{results}: no <scenario>/results.json in it: nothing to append")
    identity = identity_of(observations, date or today(), runner or trained_on(observations), verl_repo)
    scenarios = {name: [scenario_run(obs)] for name, obs in sorted(observations.items())}
    record = None
    if duet is not None:
        doc = DuetDoc.read(duet / "duet.json")
        base, head = (_side(duet, side, identity, verl_repo) for side in ("base", "head"))
        if doc.mode != "history" and (missing := [s for s, runs in (("base", base), ("head", head)) if not runs]):
            code, word = outcomes.duet_outcome("history")
            line = (f"{duet}: the duet ({doc.mode}) holds no {' and no '.join(missing)} run: recorded as not side by "
                    f"side, {ALONE}")  # fmt: skip
            doc = doc.model_copy(update={"mode": "history", "exit_code": code, "verdict": word,
                                         "lines": [*doc.lines, line]})  # fmt: skip
        for name, runs in head.items():
            scenarios.setdefault(name, []).extend(runs)
        record = duet_record(doc, base, head)
    return Night(
        id=identity.night_id(),
        identity=identity,
        appended=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        results=[str(results), *([str(duet)] if duet else [])],
        run=run or default_run(),
        scenarios=scenarios,
        duet=record,
    )


def _side(duet: Path, side: str, night: Identity, verl_repo: Path | None) -> dict[str, list[ScenarioRun]]:
    """One side's runs of a duet (``<duet>/<side>/r<i>/``, as compare lays them out), per scenario. Head's are
    tonight's: each must have the night's identity (its verl commit, msprobe, machine, ...), else HistoryError."""
    out: dict[str, list[ScenarioRun]] = {}
    where = duet / side
    for run in sorted(where.glob("r*"), key=lambda p: int(p.name[1:]) if p.name[1:].isdigit() else -1):
        try:
            observations = observe_dir(run)
        except BaselineError as exc:
            raise HistoryError(str(exc)) from None
        if not observations:
            continue
        if side == "head":
            ident = identity_of(observations, night.date, night.runner, verl_repo)
            if bad := next((k for k in AGREED if getattr(ident, k) != getattr(night, k)), None):
                raise HistoryError(
                    f"{run}: the duet's head ran {bad} {getattr(ident, bad)!r}, the night's runs "
                    f"{getattr(night, bad)!r}: a duet's head is the night's own verl (pass the duet of this night)"
                )
        for name, obs in sorted(observations.items()):
            out.setdefault(name, []).append(scenario_run(obs))
    return out
