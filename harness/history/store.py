"""The history file: every night's figures with their samples, the night's identity, and what a person accepted.

One JSON document (``safeio.Versioned``: ``schema_version``, the schema before it read too), written whole to a new
file and renamed over the old one, never edited in place. Nights are kept in the order they ran: a night older than
the newest (by date, or by its verl commit's place in verl's first-parent history) is refused, so a series is never
rewritten behind the change points already reported on it. The reader refuses, in one line, a truncated file, a file
of another schema and a night appended by another schema than the file's (a history pieced together by hand from
two harness versions): nothing is read as if it were this schema.

A history is data from outside the harness (a pull request's run may have written the file; a person edits it by
hand), so its reader trusts none of it and checks what each field claims to be: every text field (a runner's name,
verl's version, a crash's line, an accepted change's reason) is kept and shown as one line (``harness.outside.shown``:
a line break escaped, a workflow command defused); what the harness names (a figure, a night's id, a digest) is a
name; a verl commit is a commit (hex); a scenario's name is one the
scenario loader accepts (never one of the page of the nights' own files); an overhead sample, the on/off ratio of two
measured step times, is a positive normal number (a subnormal one read as an improvement of "0.00x" and passed); and
each results dir's runs are in one night once (a night copied twice changed the verdict).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, FiniteFloat, field_validator, model_validator

from harness.artifacts.figures import FIRST_PROFILED, OVERHEAD_PROFILED, SAMPLE_KEY, overhead_stage, step_of_sample
from harness.errors import HarnessError
from harness.gate.baseline import floor
from harness.outcomes import DuetMode
from harness.outside import shown
from harness.safeio import MB, InputError, Versioned
from harness.scenario.loader import name_problem

# 2: a night's run (the CI run that made it). 3: the identity holds the harness's commit and each scenario file's
# digest; the first profiled step is a figure of its own, left out of the profiled step's and the stages' series, and
# a night's overhead figure is the geometric mean of its samples (``first_apart``). A schema-2 history reads as one
# (the same split made on its samples; its harness and scenario files unknown). 4: a night's ``duet`` (how its overhead
# was decided side by side, the base side's runs) with the figures it decided regressed, per scenario (what the
# nightly's bisect plans from); a schema-3 history reads as one (its duets, where it has any, name no figure), and so
# does a schema-2 one (``History.of``)
SCHEMA = 4
MAX_BYTES = 256 * MB
# the nights kept: past it the oldest are pruned (and ``append`` says which); over a year of nightlies, ~20 kB a
# night for the tiny tier's eight scenarios
KEEP_NIGHTS = 400
DATE = r"^\d{4}-\d{2}-\d{2}$"
WEB_URL = r"^https?://[^\s<>\"'\x00-\x1f\x7f]+$"  # a page a report may link: no space, quote, bracket or control
TEXT_LIMIT = 2000  # characters of one text field (a duet's line with its reproduce command is a few hundred)
RunStatus = Literal["ok", "crashed", "error"]


def _scenario(name: str) -> str:
    if why := name_problem(name):
        raise ValueError(why)  # the key is the error's path
    return name


RATIO_RANGE = (1e-3, 1e4)  # on/off of two step times of one run: a thousandth or ten thousand times is no measurement


def _ratio(value: float) -> float:
    """An on/off ratio of two measured step times: above 0 and a normal number (a subnormal is no measurement), and
    within ``RATIO_RANGE`` (1e-300 read as an improvement of "0.00x" and passed)."""
    if value < sys.float_info.min:
        raise ValueError(f"{value!r} is no on/off ratio (a positive normal number)")
    low, high = RATIO_RANGE
    if not low <= value <= high:
        raise ValueError(f"{value!r} is no on/off ratio of two measured step times (from {low:g} to {high:g})")
    return value


def _measured(value: float) -> float:
    if value and abs(value) < sys.float_info.min:
        raise ValueError(f"{value!r} is a subnormal number: no figure measures one")
    return value


# a text field from outside (module docstring): one line, escaped and defused, however the file held it
Text = Annotated[str, AfterValidator(lambda text: shown(text, TEXT_LIMIT))]
ScenarioName = Annotated[str, AfterValidator(_scenario)]
Commit = Annotated[str, Field(pattern=r"^[0-9a-f]{7,64}$")]  # a git object name, never an option or a line
# what the harness names (a figure, a night's id, a digest) and a sample's key (``step4.rank0``): checked by pattern,
# never a line or a command of their own (a history holds hundreds of thousands of them: shown's cost is not spent)
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,200}$")]
SampleKey = Annotated[str, Field(pattern=SAMPLE_KEY.pattern)]
Ratio = Annotated[FiniteFloat, AfterValidator(_ratio)]
Figure = Annotated[FiniteFloat, AfterValidator(_measured)]


class HistoryError(HarnessError):
    """A history that cannot be read, appended to or accepted on as asked: one line, exit 2."""

    label = "HISTORY ERROR"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Identity(_Model):
    """What a night measured with, and where: two nights of the same identity are one point of every series. The
    series a figure belongs to is keyed by ``device_kind`` and ``processor`` (``harness.history.series``); the rest
    names the likely cause of a change between two nights."""

    date: Annotated[str, Field(pattern=DATE)]  # the night's day (UTC)
    verl: Text  # verl's version as installed
    verl_commit: Commit | None = None  # None: a release, not a commit of verl's history
    verl_position: Annotated[int, Field(ge=0)] | None = None  # commits on verl's first-parent line up to verl_commit
    series: Text | None = None  # the verl ref the nightly follows (main, a release)
    msprobe: Text | None = None
    torch: Text | None = None
    device_kind: Text  # the device and the CPU architecture (``gate.observe.device_kind``)
    processor: Text  # the CPU model, or the NPU type on an NPU runner: step times move with it
    image: Text | None = None  # the container image the trainings ran in (docker executor)
    runner: Text  # the machine's name: shown, not keyed (a hosted runner's name changes every night)
    # what measured: the harness's own commit and each scenario file's sha256 (None, absent: a schema-2 night, unknown).
    # A change of either moves overhead figures without any change of verl: an environment change, never blamed on it
    harness: Name | None = None
    scenarios: dict[ScenarioName, Name] = {}

    def same_night(self, other: Identity) -> bool:
        """Two results dirs of one night: the same identity, the scenario files they share the same (the Ascend
        nightly appends one results dir a scenario to one night)."""
        mine, theirs = self.model_dump(exclude={"scenarios"}), other.model_dump(exclude={"scenarios"})
        return mine == theirs and all(self.scenarios[k] == v for k, v in other.scenarios.items() if k in self.scenarios)

    def night_id(self) -> str:
        """A short, stable name of a night, for ``accept`` and the reports."""
        text = json.dumps(self.model_dump(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def commit_text(self) -> str:
        """``abc123def456 (#1234)``, ``0.9.1 (a release)``."""
        if not self.verl_commit:
            return f"verl {self.verl} (a release)"
        at = f" (#{self.verl_position})" if self.verl_position is not None else ""
        return f"verl {self.verl_commit[:12]}{at}"


class ScenarioRun(_Model):
    """One scenario of one results dir: every numeric figure, each overhead figure's samples (its on/off ratio per
    step and rank) and tolerance, as ``first_apart`` makes them. A run whose training crashed or failed is kept,
    marked, and is no point of any series."""

    source: Name  # the results.json's fingerprint: the same results dir (or a copy of it) is appended once
    status: RunStatus
    why: list[Text] = []  # the crash or error lines of a run that is not ``ok``
    figures: dict[Name, Figure] = {}
    samples: dict[Name, dict[SampleKey, Ratio]] = {}
    tolerances: dict[Name, Annotated[Figure, Field(ge=0)]] = {}


class Duet(_Model):
    """How the night's overhead was decided side by side (``harness duet``): its mode, the base (the last good night's
    verl), the verdict and its lines, and the base side's runs (the page shows both sides; the series hold tonight's
    runs only: the base's verl is an older night's). ``ratios``: per scenario, each overhead figure's head/base over
    the pairs (the geometric means of the sides' runs); under ``noise`` both sides are tonight's verl (A/A noise)."""

    mode: DuetMode
    base_commit: Commit | None = None
    base_night: Name | None = None
    exit_code: int
    verdict: Text
    lines: list[Text] = []
    regressed: dict[ScenarioName, list[Name]] = {}  # per scenario, the overhead figures decided REGRESSED (schema 4)
    base_runs: dict[ScenarioName, list[ScenarioRun]] = {}
    ratios: dict[ScenarioName, dict[Name, Ratio]] = {}


class Night(_Model):
    """One night: its identity and, per scenario, the runs of that night (two results dirs of the same identity are
    one night with two runs), and its duet where one ran."""

    schema_version: int = SCHEMA
    id: Name
    identity: Identity
    appended: Text  # when it was appended (UTC, ISO 8601)
    results: list[Text] = []  # the results dirs it came from, as given
    run: Annotated[str, Field(pattern=WEB_URL)] | None = None  # the CI run that made it, linked from the page
    scenarios: dict[ScenarioName, list[ScenarioRun]]
    duet: Duet | None = None

    def runs(self) -> list[ScenarioRun]:
        """Every run the night holds: its own and its duet's base side's."""
        base = self.duet.base_runs.values() if self.duet else []
        return [r for runs in [*self.scenarios.values(), *base] for r in runs]

    def sources(self) -> set[str]:
        return {r.source for r in self.runs()}

    def named(self) -> str:
        return f"night {self.id} ({self.identity.date})"


class Acceptance(_Model):
    """A change point a person acknowledged as intended (``history accept``): later nights stop failing on it."""

    change: Text  # ``<scenario>:<metric>@<night id>``, the night being the change point's first night after
    reason: Text
    accepted: Text  # when (UTC, ISO 8601)


def _profiled_steps(metric: str) -> bool:
    """A figure whose samples are profiled steps: the profiled step's and each stage's (the unprofiled steps' are
    not)."""
    return metric == OVERHEAD_PROFILED or metric.startswith(overhead_stage(""))


def first_apart(
    figures: dict[str, float], samples: dict[str, dict[str, float]], tolerances: dict[str, float]
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, float]]:
    """A run's overhead figures as the history keeps them, one statistic everywhere (the series, the page, the docs'
    tables): a figure with samples is the geometric mean of its samples (the mean of their logarithms, what the
    detector and base against head read; ``checks.stats.paired``), and the first profiled step is a figure of its own.

    The first profiled step pays msprobe's one-time set-up (its hooks installed, its dump dirs made: about 1.8x the
    later profiled steps on tiny_fsdp_l1), and was a quarter of every night's point: its noise, not verl's, made the
    one change point of verl's own 15 nights (docs/history.md). Where a run profiles two steps or more, its first
    step's samples are left out of the profiled step's and every stage's series, and the profiled step's first-step
    samples are ``FIRST_PROFILED`` (msprobe's set-up, judged at a stage's tolerance: one step's samples). A run that
    profiles one step has no later step: its figures are that step's, and no ``FIRST_PROFILED``."""
    figures, samples, tolerances = dict(figures), dict(samples), dict(tolerances)
    for metric, values in list(samples.items()):
        if not values:
            continue
        if _profiled_steps(metric):
            steps = sorted({step_of_sample(k) for k in values})
            if len(steps) > 1:
                first = {k: v for k, v in values.items() if step_of_sample(k) == steps[0]}
                values = {k: v for k, v in values.items() if k not in first}
                if metric == OVERHEAD_PROFILED:
                    samples[FIRST_PROFILED] = first
                    figures[FIRST_PROFILED] = _geomean(first)
                    tolerances[FIRST_PROFILED] = floor(FIRST_PROFILED)
        samples[metric] = values
        figures[metric] = _geomean(values)
    return figures, samples, tolerances


def _geomean(values: dict[str, float]) -> float:
    return round(math.exp(statistics.fmean(math.log(v) for v in values.values())), 4)


def _upgrade_run(run: Any) -> Any:
    """A schema-2 run (its overhead figures the check's medians, the first profiled step in every series) as schema
    3's: ``first_apart`` on its samples."""
    if not (isinstance(run, dict) and isinstance(run.get("samples"), dict) and isinstance(run.get("figures"), dict)):
        return run  # left for validation to name
    try:
        figures, samples, tolerances = first_apart(run["figures"], run["samples"], run.get("tolerances") or {})
    except (TypeError, ValueError, AttributeError):
        return run  # not numbers: validation names it
    return run | {"figures": figures, "samples": samples, "tolerances": tolerances}


class History(Versioned):
    FILE = "history"
    REDO = "append the nights again with this harness, or check it with the harness that wrote it"
    schema_version: Literal[4] = 4
    nights: list[Night] = []
    accepted: list[Acceptance] = []
    pruned: Annotated[int, Field(ge=0)] = 0  # nights pruned past the size cap so far

    @classmethod
    def of(cls, doc: object) -> History:
        """Schema 2 read too, two schemas back: made schema 3's first (``_upgrade_night``), then read as schema 3. A
        night appended by another schema than its file's is refused first, by the schemas as written."""
        version = doc.get("schema_version", 1) if isinstance(doc, dict) else SCHEMA
        if type(version) is not int or version not in (2, 3, SCHEMA):
            raise InputError(f"{cls.FILE} written by schema {shown(repr(version))}, this harness reads schemas 2, 3 "
                             f"and {SCHEMA}: {cls.REDO}")  # fmt: skip
        if isinstance(doc, dict) and (mixed := _mixed(doc)):
            raise InputError(f"{mixed}: not a harness {cls.FILE}")
        if isinstance(doc, dict) and version == 2 and isinstance(doc.get("nights"), list):
            doc = doc | {"schema_version": 3, "nights": [_upgrade_night(n) for n in doc["nights"]]}
        return super().of(doc)

    @classmethod
    def upgrade(cls, doc: dict[str, Any]) -> dict[str, Any]:
        """Schema 3's nights are schema 4's (a duet recorded then names no regressed figure)."""
        nights = doc.get("nights")
        if isinstance(nights, list):
            doc = doc | {"nights": [n | {"schema_version": SCHEMA} if isinstance(n, dict) else n for n in nights]}
        return doc

    @model_validator(mode="before")
    @classmethod
    def _one_schema(cls, doc: Any) -> Any:
        """Every night appended by this file's schema: a history pieced together from two harness versions is
        refused naming the first night that is not, rather than read as if it were."""
        if isinstance(doc, dict) and (mixed := _mixed(doc)):
            raise ValueError(mixed)
        return doc

    @field_validator("nights")
    @classmethod
    def _each_run_once(cls, nights: list[Night]) -> list[Night]:
        """Each results dir's runs in one night, once: a night copied twice (or a run twice in a night) would be
        two points (more samples) of the same measurement and move the verdict. ``add`` refuses them as they come,
        this as the file is read."""
        seen: dict[str, Night] = {}
        for night in nights:
            mine: set[str] = set()
            for run in night.runs():
                if run.source in mine or run.source in seen:
                    again = f"the runs of {seen[run.source].named()}" if run.source in seen else "one of its runs twice"
                    raise ValueError(f"{night.named()} holds {again} (results {run.source}): a night copied twice, "
                                     "each results dir is one night's once (remove the copy)")  # fmt: skip
                mine.add(run.source)
            seen |= dict.fromkeys(mine, night)
        return nights

    @classmethod
    def read(cls, path: Path) -> History:
        """``path`` as a history; a path that does not exist is a new, empty one. HistoryError in one line (the
        file, what is wrong, what to do) otherwise."""
        if not path.exists() and not path.is_symlink():
            return cls()
        try:
            return cls.read_file(path, MAX_BYTES)
        except InputError as exc:
            raise HistoryError(f"{path}: {exc}") from None

    def night(self, night_id: str) -> tuple[int, Night] | None:
        return next(((i, n) for i, n in enumerate(self.nights) if n.id == night_id), None)


def _mixed(doc: dict[str, Any]) -> str | None:
    """The first night of ``doc`` appended by another schema than the file's, in one line; None when there is none."""
    nights = doc.get("nights")
    for i, night in enumerate(nights if isinstance(nights, list) else []):
        if not isinstance(night, dict):
            continue  # not a night at all: validation names it
        said = night.get("schema_version", SCHEMA)
        if said != doc.get("schema_version", SCHEMA):
            day = shown(night["identity"].get("date", "?")) if isinstance(night.get("identity"), dict) else "?"
            return (
                f"night {i + 1} ({day}) was appended by schema {shown(repr(said))}, the file is schema "
                f"{shown(repr(doc.get('schema_version', SCHEMA)))}: a mixed-version history"
            )
    return None


def _upgrade_night(night: Any) -> Any:
    """A schema-2 night as schema 3's: its runs split by ``first_apart``."""
    if not isinstance(night, dict):
        return night  # left for validation to name
    scenarios = night.get("scenarios")
    if isinstance(scenarios, dict):
        night = night | {"scenarios": {k: [_upgrade_run(r) for r in v] if isinstance(v, list) else v
                                       for k, v in scenarios.items()}}  # fmt: skip
    return night | {"schema_version": 3}


def add(history: History, night: Night, keep: int = KEEP_NIGHTS) -> tuple[History, list[str]]:
    """``history`` with ``night`` added: merged into the newest night when their identities are the same, refused
    (HistoryError, one line) when it is older than the newest or its results are already in; the oldest nights
    pruned past ``keep``. Returns the new history and what was done, one line each."""
    seen = {s: n for n in history.nights for s in n.sources()}
    if dup := sorted(night.sources() & set(seen)):
        first = seen[dup[0]]
        raise HistoryError(
            f"{', '.join(night.results)}: already in the history as night {first.id} ({first.identity.date}): a "
            "results dir (or a copy of it) is appended once"
        )
    lines: list[str] = []
    nights = list(history.nights)
    newest = nights[-1] if nights else None
    if newest is not None and newest.identity.same_night(night.identity):
        scenarios = {k: list(v) for k, v in newest.scenarios.items()}
        for name, runs in night.scenarios.items():
            scenarios.setdefault(name, []).extend(runs)
        files = newest.identity.scenarios | night.identity.scenarios
        if newest.duet and night.duet:
            raise HistoryError(
                f"{', '.join(night.results)}: night {newest.id} ({newest.identity.date}) already holds a duet: one "
                "duet a night (append each duet's results dir once)"
            )
        merged = {"scenarios": scenarios, "results": [*newest.results, *night.results], "run": newest.run or night.run,
                  "identity": newest.identity.model_copy(update={"scenarios": files}),
                  "duet": newest.duet or night.duet}  # fmt: skip
        nights[-1] = newest.model_copy(update=merged)
        lines.append(f"merged into night {newest.id} ({newest.identity.date}): the same identity, one point more runs")
    else:
        if newest is not None:
            _check_order(newest.identity, night.identity)
        nights.append(night)
        lines.append(f"night {night.id} ({night.identity.date}, {night.identity.commit_text()}) appended")
    pruned = 0
    if len(nights) > keep:
        pruned = len(nights) - keep
        gone = nights[:pruned]
        nights = nights[pruned:]
        lines.append(
            f"pruned the {pruned} oldest night{'s' if pruned > 1 else ''} ({gone[0].identity.date} to "
            f"{gone[-1].identity.date}): the history keeps {keep}"
        )
    return history.model_copy(update={"nights": nights, "pruned": history.pruned + pruned}), lines


def _check_order(newest: Identity, night: Identity) -> None:
    if night.date < newest.date:
        raise HistoryError(
            f"night of {night.date} is older than the newest night ({newest.date}): nights are appended in the "
            "order they ran (the history is unchanged)"
        )
    was, now = newest.verl_position, night.verl_position
    if was is not None and now is not None and now < was:
        raise HistoryError(
            f"night of {night.commit_text()} is older in verl's first-parent history than the newest night "
            f"({newest.commit_text()}): nights are appended in verl's order (the history is unchanged)"
        )
