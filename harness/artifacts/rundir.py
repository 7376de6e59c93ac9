"""Where one scenario's artifacts live on disk; every later stage reads from here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Mode = Literal["off", "on"]
MODES: tuple[Mode, ...] = ("off", "on")


@dataclass(frozen=True)
class RunDir:
    """One training run: ``<results>/<scenario>/<mode>/``."""

    root: Path

    @property
    def mode(self) -> Mode:
        return self.root.name  # type: ignore[return-value]

    @property
    def spec(self) -> Path:
        return self.root / "spec.json"

    @property
    def msprobe_config(self) -> Path:
        return self.root / "msprobe_config.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def log(self) -> Path:
        return self.root / "train.log"

    @property
    def dumps(self) -> Path:
        return self.root / "dumps"

    @property
    def record(self) -> Path:
        return self.root / "run.json"

    @property
    def dump_facts(self) -> Path:
        """What the run's one read of each dump found (``harness.artifacts.dumpfacts``): beside its dumps, not in
        them (the dumps dir is the code under test's)."""
        return self.root / "dump_facts.json"

    @property
    def finish_hook(self) -> Path:
        """What verl's finish hook recorded, one listing a run of it (``harness.artifacts.finish_hook``)."""
        return self.root / "finish_hook"

    @property
    def nodes(self) -> Path:
        """nodes.json: a run on a Ray cluster's nodes (``harness.artifacts.nodes``)."""
        return self.root / "nodes.json"


@dataclass(frozen=True)
class ScenarioDir:
    """``<results>/<scenario>/``: both runs, the cache marker and results.json."""

    root: Path

    def run(self, mode: Mode) -> RunDir:
        return RunDir(self.root / mode)

    @property
    def lock(self) -> Path:
        return self.root.parent / f".{self.root.name}.lock"

    @property
    def trainings_record(self) -> Path:
        """trainings.json: the scenario's two trainings as one session made them (beside each run dir's run.json,
        one training's record)."""
        return self.root / "trainings.json"

    @property
    def trainings_record_read(self) -> Path:
        """The trainings' record to read: ``trainings_record``, else the first there of its earlier names (a results
        dir of an earlier harness, re-checked with ``--reuse``): session.json (before #84), runs.json (before #73)."""
        for path in (self.trainings_record, self.root / "session.json", self.root / "runs.json"):
            if os.path.lexists(path):
                return path
        return self.trainings_record

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    def link(self, dumps: bool = True) -> Path | None:
        """The first of this dir, its run dirs and (``dumps``) their dumps dirs that is a symbolic link, or None.
        Results are read in place only: a linked run dir had every check (a ``--reuse`` re-check too), the gate and
        the history read another tree as this scenario's. (A dumps dir is the code under test's to make: a training
        that links it fails the layout check.)"""
        runs = [self.run(mode) for mode in MODES]
        found = [self.root, *(r.root for r in runs), *(r.dumps for r in runs if dumps)]
        return next((p for p in found if p.is_symlink()), None)


LINKED = "a symbolic link in a results dir: results are read in place only"  # what a reader refusing one says
