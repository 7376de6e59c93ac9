"""One read: a compare opens each dump.json once, when its run is judged (the contents check's read, and a read of its
own for a dump no check reads), which folds what every later reader needs of it into the run's facts
(``dump_facts.json``: the structure's names, the numerics' md5 mode, the digest of its bytes); the numerics read the
bytes of base's first runs and head's first again through the files those checks opened (``pread``, no second open);
every later reader, in any process (the gate, the baseline, the reports, the history), reads the facts and opens no
dump. Counted by an audit hook on ``open`` (every open, the C-level ones included), on synthetic runs
(``write_good_case``: no training). msprobe's own compare (``compare -da`` where a stage diverges, or
``HARNESS_NUMERICS=msprobe``) runs in a child process: msprobe's reads, not the harness's, and none here (no stage
diverges)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from builders import write_dump, write_good_case

from harness.artifacts import dumpfile
from harness.artifacts.dumpfacts import DumpFacts, DumpReads
from harness.artifacts.dumpfile import Changed, normalise
from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.rundir import ScenarioDir
from harness.cli import main
from harness.gate.judge import ComparePolicy
from harness.gate.observe import observe_results
from harness.gate.structure import structure_of
from harness.pipeline.session import Session
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


def _run(where: Path, wall_s: float = 1.0) -> tuple[Any, ScenarioDir]:
    """A run's results dir at ``where/<scenario>`` as a good pair of trainings leaves it, with its trainings' record
    so that it is judged without training (``reuse``); ``wall_s``: its trainings' (two runs are no copy of each
    other)."""
    scenario, made = write_good_case(where / "made")
    sdir = ScenarioDir(where / scenario.name)
    shutil.move(made.root, sdir.root)
    ok = ExecResult(exit_code=0, wall_s=wall_s)
    records = {m: RunRecord(mode=m, executor="local", argv=["python"], result=ok).model_dump() for m in ("off", "on")}
    doc = {"session": "earlier", "fingerprint": fingerprint(scenario, pinned_target()), "records": records}
    sdir.trainings_record.write_text(json.dumps(doc))
    return scenario, sdir


def _reorder(dump: Path) -> None:
    """The entries of one dump in reverse order: the bench's order parts from it, and its name index is read."""
    doc = json.loads(dump.read_text())
    doc["data"] = dict(reversed(doc["data"].items()))
    dump.write_text(json.dumps(doc, indent=1))


def _compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opens: Counter[str]
) -> tuple[Any, dict[str, list[str]], Path]:
    """``Session.compare`` of two runs a side (the ABBA order: base 1, head 1, head 2, base 2), every run judged as
    harness compare judges it and the numerics after, its opens counted; the runs are the synthetic ones, reused, not
    trained."""
    results = tmp_path / "compare"
    runs = {f"{side}/r{i}": _run(results / side / f"r{i}", 1.0 + i) for side in ("base", "head") for i in (0, 1)}
    _reorder(runs["head/r0"][1].run("on").dumps / "step_2/actor_update/step0/rank0/dump.json")
    made = Session._made
    monkeypatch.setattr(
        Session,
        "_made",
        lambda self, scenario, env, where, reuse, modes, label: made(self, scenario, env, where, True, modes, label),
    )
    scenario = runs["base/r0"][0]
    opens.clear()
    compared = Session(results, say=lambda line: None).compare(
        [scenario], pinned_target(), pinned_target(), ComparePolicy(repeats=2, max_repeats=2)
    )
    dumps = {run: sorted(str(p) for p in sdir.run("on").dumps.rglob("dump.json")) for run, (_, sdir) in runs.items()}
    return compared, dumps, results


def test_a_compare_opens_each_dump_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opens: Counter[str]):
    """Two runs a side, each judged, then numerics (head's first against base's first, base's second against its
    first), base's first run's dumps the bench of both. Before the facts: 2 to 4 opens a dump (the contents check, the
    structure where its summary was not remembered, the numerics' once per comparison that reads it)."""
    compared, dumps, results = _compare(tmp_path, monkeypatch, opens)
    (sc,) = compared.scenarios
    assert sc.numerics is not None and not sc.errors and sc.numerics.head_vs_base.clean, sc.errors
    assert sc.numerics.determinism is not None and sc.numerics.determinism.clean
    assert len(dumps["base/r0"]) == 8
    assert opens == Counter(p for paths in dumps.values() for p in paths)  # each once: by its run's checks
    for run in dumps:  # the facts of each run, stored beside it, as a later process reads them
        facts = DumpFacts.recorded(ScenarioDir(results / run / "tiny_case").run("on"))
        assert facts is not None and len(facts.dumps) == 8 and all(f.names for f in facts.dumps.values())
    assert [o.structure for o in compared.observed["tiny_case"]["head"]] == [
        structure_of(ScenarioDir(results / run / "tiny_case").run("on").dumps) for run in ("head/r0", "head/r1")
    ]


def test_a_nights_later_steps_open_no_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opens: Counter[str]):
    """What a night does after its runs, each as its own command would in another process: the baseline merged from
    two results dirs, the gate of a third against it, the report, the history appended. Each reads the runs' facts:
    no dump.json is opened (each opened every dump it observed, once more, before)."""
    _, dumps, results = _compare(tmp_path, monkeypatch, opens)
    runs = {run: str(results / run) for run in dumps}
    baseline, gate, history = tmp_path / "baseline.json", tmp_path / "gate.json", tmp_path / "history.json"
    opens.clear()
    assert main(["baseline", "merge", runs["base/r0"], runs["base/r1"], "-o", str(baseline)]) == 0
    assert main(["gate", "--baseline", str(baseline), "--results", runs["head/r0"], "--json", str(gate)]) in (0, 1, 3)
    assert main(["report", runs["head/r0"], "--gate", str(gate), "--out", str(tmp_path / "report")]) == 0
    assert main(["history", "append", str(history), runs["head/r0"], "--runner", "here"]) == 0
    assert observe_results(Path(runs["head/r1"]) / "tiny_case" / "results.json").structure
    assert not opens, opens


def test_a_dump_changed_after_its_read_is_told_by_its_bytes(tmp_path: Path):
    """A dump rewritten after its run's one read (other names, the same size and times) is told by its digest where
    its bytes are read again (the numerics, through the file its checks held open), never taken for the dump its facts
    describe; a dump without stored facts (a tree of dumps alone) is read by each reader, nothing kept between."""
    dump = write_dump(tmp_path / "on" / "dumps", 2, "actor_update", 0) / "dump.json"
    reads = DumpReads(tmp_path / "on" / "dumps", hold=True)
    held = reads.dump(dump)
    assert held.read_summary().names["Functional.linear.forward"] > 0
    for _ in held.runs():  # a reader of the bytes again: the same digest
        pass
    st = os.stat(dump)
    text = dump.read_text()
    with open(dump, "r+") as f:  # in place: the held file sees it; the same size, its times put back
        f.write(text.replace("linear", "matmul"))
    os.utime(dump, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(dump).st_size, os.stat(dump).st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    with pytest.raises(Changed, match="changed since its facts were read"):
        for _ in held.runs():
            pass
    reads.close()
    names = structure_of(tmp_path / "on" / "dumps")["actor_update/rank0"]["names"]  # no facts stored: read here
    assert set(names) == {"Functional.matmul.forward", "Functional.matmul.backward"}


def test_a_rejudged_run_reads_its_dumps_again_and_stores_what_they_hold(tmp_path: Path):
    """A run judged again (``--reuse``) reads its dumps again: its facts are those of the dumps as they are now, the
    stored ones replaced (a dump rewritten since, the same size and times, gives other names)."""
    scenario, sdir = _run(tmp_path / "res")
    env = Session(tmp_path).env(pinned_target())
    Session(sdir.root.parent, reuse=True, id="first").evaluate(scenario, env)
    before = DumpFacts.recorded(sdir.run("on"))
    assert before is not None
    dump = sdir.run("on").dumps / "step_2/actor_update/step0/rank0/dump.json"
    st = os.stat(dump)
    dump.write_text(dump.read_text().replace("linear", "matmul"))
    os.utime(dump, ns=(st.st_atime_ns, st.st_mtime_ns))
    Session(sdir.root.parent, reuse=True, id="again").evaluate(scenario, env)
    after = DumpFacts.recorded(sdir.run("on"))
    assert after is not None
    rel = "step_2/actor_update/step0/rank0/dump.json"
    assert after.dumps[rel].digest != before.dumps[rel].digest and after.dumps[rel].size == before.dumps[rel].size
    assert "Functional.matmul.forward" in (after.dumps[rel].names or {})
    assert "Functional.matmul.forward" in observe_results(sdir.results).structure["actor_update/rank0"]["names"]


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
