"""One read: a compare opens each dump.json once per run (the contents check's read, which leaves the structure and
the md5 test their summary) and once per comparison that reads it (numerics: head against base, base's second run
against its first). Counted by an audit hook on ``open`` (every open, the C-level ones included), on synthetic runs
(``write_good_case``: no training). msprobe's own compare (``compare -da`` where a stage diverges, or
``HARNESS_NUMERICS=msprobe``) runs in a child process: msprobe's reads, not the harness's, and none here (no stage
diverges)."""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from builders import write_dump, write_good_case

from harness.artifacts import dumpfile
from harness.artifacts.dumpfile import RACY_NS, normalise
from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.rundir import ScenarioDir
from harness.gate.judge import compare_runs
from harness.gate.observe import Observation, observe_results
from harness.gate.structure import structure_of
from harness.pipeline.base_head import add_numerics
from harness.pipeline.session import Session
from harness.targets.environment import ensure_env
from harness.targets.spec import pinned_target
from harness.training.runs import fingerprint

_OPENS: list[Counter[str]] = []  # the counter being filled, while a test counts


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Every ``open`` of a path ending in dump.json, by whatever opened it (builtins.open, os.open, C code)."""
    if _OPENS and event == "open" and isinstance(args[0], str | Path) and str(args[0]).endswith("dump.json"):
        _OPENS[-1][str(args[0])] += 1


@pytest.fixture
def opens() -> Any:
    """A counter of dump.json opens while the test runs (an audit hook stays for the process: it counts only here)."""
    if not getattr(sys, "_one_read_hook", False):
        sys.addaudithook(_audit)
        sys._one_read_hook = True  # type: ignore[attr-defined]
    _OPENS.append(Counter())
    yield _OPENS[-1]
    _OPENS.clear()


def _run(root: Path) -> tuple[Any, ScenarioDir]:
    """A run's results dir as a good pair of trainings leaves it, with runs.json so that ``--reuse`` checks it."""
    scenario, sdir = write_good_case(root)
    ok = ExecResult(exit_code=0, wall_s=1.0)
    records = {m: RunRecord(mode=m, executor="local", argv=["python"], result=ok).model_dump() for m in ("off", "on")}
    doc = {"session": "earlier", "fingerprint": fingerprint(scenario, pinned_target()), "records": records}
    sdir.session_record.write_text(json.dumps(doc))
    return scenario, sdir


def _reorder(dump: Path) -> None:
    """The entries of one dump in reverse order: the bench's order parts from it, and its name index is read."""
    doc = json.loads(dump.read_text())
    doc["data"] = dict(reversed(doc["data"].items()))
    dump.write_text(json.dumps(doc, indent=1))


def test_a_compare_opens_each_dump_once_per_run_and_once_per_comparison(tmp_path: Path, opens: Counter[str]):
    """Two runs a side, each checked (``evaluate``) and observed as ``harness compare`` does, then numerics. Before
    the one read: 2 opens a run (the contents check, the structure) and 2 for head's dumps in a comparison (the md5
    test, the rows), 3 for a bench whose order parts from head's (the name index's two)."""
    env = ensure_env(pinned_target())
    runs = {(side, i): _run(tmp_path / side / f"r{i}") for side in ("base", "head") for i in (0, 1)}
    reordered = runs[("head", 0)][1].run("on").dumps / "step_2/actor_update/step0/rank0/dump.json"
    _reorder(reordered)
    time.sleep(RACY_NS / 1e9)  # as a training leaves them: a read just after a write is not remembered (racy)
    opens.clear()
    sides: dict[str, list[Observation]] = {"base": [], "head": []}
    for (side, _), (scenario, sdir) in runs.items():
        Session(sdir.root.parent, reuse=True, id="now").evaluate(scenario, env)
        sides[side].append(observe_results(sdir.results))
    dumps = {side: sorted(str(p) for p in sdir.run("on").dumps.rglob("dump.json")) for side, (_, sdir) in runs.items()}
    assert len(dumps[("base", 0)]) == 8
    assert opens == Counter(p for paths in dumps.values() for p in paths)  # each once, by the contents check

    opens.clear()
    sc = compare_runs(scenario.name, sides["base"], sides["head"], {"structure"})
    add_numerics(sc, scenario, sides, tmp_path / "out", None)
    assert sc.numerics is not None and not sc.errors and sc.numerics.head_vs_base.clean
    # head's first against base's first, base's second against its first: base's first is the bench of both
    want = Counter(dumps[("head", 0)] + dumps[("base", 1)] + 2 * dumps[("base", 0)])
    assert opens == want


def test_a_dump_changed_after_its_read_is_read_again(tmp_path: Path, opens: Counter[str]):
    """The summary of a read is the file's as it was: a dump rewritten since (other names, the same size, at once) is
    read again; and one read just after it was written is read again too (its times may not show a rewrite)."""
    dump = write_dump(tmp_path, 2, "actor_update", 0) / "dump.json"
    time.sleep(RACY_NS / 1e9)
    opens.clear()
    before = structure_of(tmp_path)
    assert structure_of(tmp_path) == before and opens[str(dump)] == 1  # the second from the first read's summary
    doc = json.loads(dump.read_text())
    doc["data"] = {k.replace("linear", "matmul"): v for k, v in doc["data"].items()}  # as many characters
    dump.write_text(json.dumps(doc))
    opens.clear()
    after = structure_of(tmp_path)["actor_update/rank0"]["names"]
    assert set(after) == {"Functional.matmul.forward", "Functional.matmul.backward"}
    assert structure_of(tmp_path)["actor_update/rank0"]["names"] == after and opens[str(dump)] == 2  # racy: again


def test_the_fold_by_hand_is_the_expressions_fold():
    """The contents check's read folds every entry's name for the structure: an API's by hand (most names), the same
    names as msprobe's patterns give, digits of other scripts and newlines included."""
    rnd = random.Random(73)
    parts = ["Functional", "linear", "Module", "Cell", "forward", "backward", "parameters_grad", "0", "12", "٣", "²"]
    for _ in range(20000):
        name = ".".join(rnd.choice([*parts, "", "x\n"]) for _ in range(rnd.randint(1, 6))) + rnd.choice(["", "\n"])
        want = m["head"] if (m := dumpfile._MODULE.match(name)) else name
        if not m and (m := dumpfile._API.match(name)):
            want = f"{m['head']}.{m['dir']}"
        assert normalise(name) == want, name
