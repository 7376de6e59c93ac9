"""Histories made by hand for the bad-input table's rows on the history (tests/bad_input_rows.py, #82): nights of one
scenario through the store's own models (``add``, as ``history append`` adds them), then edited as a file the way a
hand or a pull request's run could edit it; and the history branch of ``.ci/history`` in a bare repository."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.history.store import History, Identity, Night, ScenarioRun, add

PROFILED = "overhead.wall.profiled"
SCENARIO = "tiny_case"
BRANCH = "precision-debugger-history"
# a quiet nightly's night-to-night spread, fixed: every verdict the rows read is the same on every run
NOISE = (0.012, -0.018, 0.004, 0.021, -0.009, -0.015, 0.017, -0.003, 0.008, -0.021, 0.013, -0.006, 0.019, -0.012)
EVIL = "x\n::error title=all good::merge it"  # a line of its own would be an annotation of its own


def nights(n: int, step_at: int | None = None) -> History:
    """``n`` nights of tiny_case's profiled step (a verl commit each), 1.4x slower from night ``step_at`` on."""
    history = History()
    for i in range(1, n + 1):
        ident = Identity(date=f"2026-11-{i:02d}", verl="0.10.0.dev0", verl_commit=f"{i:040x}",
                         verl_position=100 + 3 * i, series="main", msprobe="26.2.0", torch="2.13.0+cpu",
                         device_kind="cpu/x86_64", processor="Xeon", runner="runner-1")  # fmt: skip
        level = 4.0 * (1.4 if step_at and i >= step_at else 1.0) * (1 + NOISE[i % len(NOISE)])
        samples = {f"step{s}.rank{r}": level * (1 + 0.01 * (s - r - 3)) for s in (2, 4, 6, 8) for r in (0, 1)}
        run = ScenarioRun(source=f"night{i}", status="ok", figures={PROFILED: level}, samples={PROFILED: samples},
                          tolerances={PROFILED: 0.075})  # fmt: skip
        night = Night(id=ident.night_id(), identity=ident, appended="2026-11-30T00:00:00+00:00",
                      scenarios={SCENARIO: [run]})  # fmt: skip
        history, _ = add(history, night)
    return history


def history_file(path: Path, n: int, edit: Callable[[dict[str, Any]], object] = lambda doc: None,
                 step_at: int | None = None) -> Path:  # fmt: skip
    """``nights(n, step_at)`` written to ``path`` as ``history append`` writes it, then ``edit``ed as JSON."""
    doc = json.loads(nights(n, step_at).model_dump_json())
    edit(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return path


def run_of(doc: dict[str, Any], night: int) -> dict[str, Any]:
    """Night ``night``'s (from 1) run of tiny_case in a history document."""
    run: dict[str, Any] = doc["nights"][night - 1]["scenarios"][SCENARIO][0]
    return run


def change_at(night: int) -> str:
    """The name ``history accept`` takes for the profiled step's change point at night ``night`` (from 1)."""
    return f"{SCENARIO}:{PROFILED}@{nights(night).nights[night - 1].id}"


def git(*argv: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *argv], cwd=cwd, capture_output=True, check=True)


def branch_with(tmp: Path, links: dict[str, str]) -> Path:
    """A bare repository whose history branch holds cpu.json (two nights) and ``links`` (path on the branch: where
    it points, absolute), as another writer could have pushed them."""
    work = tmp / "seed"
    git("init", "-q", "-b", BRANCH, str(work))
    history_file(work / "cpu.json", 2)
    for where, target in links.items():
        (work / where).parent.mkdir(parents=True, exist_ok=True)
        if where == "cpu.json":
            (work / where).unlink()
        (work / where).symlink_to(target)
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed", cwd=work)
    bare = tmp / "history.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    return bare
