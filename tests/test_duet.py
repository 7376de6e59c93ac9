"""The nightly as a duet (harness/history/duet.py, harness duet, history append --duet): the base read from the history
(the newest night whose overhead passed, of tonight's settings, its commit in the clone), the noise record of an
unchanged verl, both sides recorded with the night, and every bad input one line naming what the night did instead.
The duet's trainings (compare's machinery) run in benchmarks/duet_series.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from gate_builders import ENV, write_results
from test_history import history_of, night

from harness import outcomes
from harness.artifacts.figures import OVERHEAD_PROFILED
from harness.cli import main
from harness.history.checkdoc import CheckRange, HistoryCheckDoc
from harness.history.duet import DuetDoc, last_good, plan
from harness.history.store import Duet, History

DIGEST = "d" * 64
ROOT = Path(__file__).resolve().parents[1]


def clone(tmp_path: Path, commits: int) -> tuple[Path, list[str]]:
    """A git repository of ``commits`` commits on main, oldest first."""
    repo = tmp_path / "verl"
    repo.mkdir()
    run = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*run, "init", "-q", "-b", "main"], cwd=repo, check=True)
    shas = []
    for i in range(commits):
        (repo / "f").write_text(str(i))
        subprocess.run([*run, "add", "f"], cwd=repo, check=True)
        subprocess.run([*run, "commit", "-qm", f"c{i}"], cwd=repo, check=True)
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                   check=True).stdout.strip())  # fmt: skip
    return repo, shas


def nights_on(shas: list[str], levels: list[float] | None = None, duets: dict[int, int] | None = None) -> History:
    """One night per commit (its scenario file ``DIGEST``), each night's duet exit as ``duets`` says (night index ->
    exit code)."""
    made = []
    for i, sha in enumerate(shas, 1):
        n = night(i, (levels or [4.0] * len(shas))[i - 1], verl_commit=sha, scenarios={"tiny": DIGEST})
        if duets and (code := duets.get(i)) is not None:
            n = n.model_copy(update={"duet": Duet(mode="duet", exit_code=code, verdict=outcomes.exit_word(code))})
        made.append(n)
    return history_of(made)


def test_the_base_is_the_newest_night_whose_duet_passed(tmp_path):
    repo, shas = clone(tmp_path, 5)
    history = nights_on(shas[:4], duets={3: outcomes.EXIT_PASS, 4: outcomes.EXIT_FAIL})
    p = plan(history, shas[4], repo, {"tiny": DIGEST})
    assert (p.mode, p.base_commit) == ("duet", shas[2])
    assert p.line.startswith(f"tonight's verl {shas[4][:12]} against the last good night {history.nights[2].id}")


def test_nights_after_a_regression_the_history_holds_are_no_base(tmp_path):
    """A confirmed step at night 8 (x1.3) the nights' own duets did not see: the base is night 7, before it."""
    _, shas = clone(tmp_path, 13)
    history = nights_on(shas[:12], [4.0 * (1.3 if i >= 8 else 1.0) for i in range(1, 13)])
    base, _ = last_good(history, {"tiny": DIGEST})
    assert base is not None and base.identity.verl_commit == shas[6]


def test_unchanged_verl_goes_to_the_noise_record(tmp_path):
    repo, shas = clone(tmp_path, 3)
    p = plan(nights_on(shas), shas[2], repo, {"tiny": DIGEST})
    assert (p.mode, p.base_commit) == ("noise", shas[2])
    assert "verl did not move since the last good night" in p.line and "noise record" in p.line


@pytest.mark.parametrize(
    ("case", "said"),
    [
        (
            "empty",
            "no base for the duet: the history holds no night yet: this night's overhead is decided by the "
            "history alone",
        ),
        ("force-pushed", "its verl commit is not in"),
        (
            "settings",
            "ran scenarios/tiny.yaml with other settings (sha256 dddddddddddd, tonight eeeeeeeeeeee), and "
            "no good night before it ran tonight's: the history is of other settings",
        ),
        ("other scenario", "did not run tiny_other (ok)"),
        ("all failed", "none of the history's 3 nights passed its overhead"),
    ],
)
def test_no_base_is_one_line_and_the_history_decides(tmp_path, case, said):
    repo, shas = clone(tmp_path, 4)
    history, digests = nights_on(shas[:3]), {"tiny": DIGEST}
    if case == "empty":
        history = History()
    elif case == "force-pushed":
        history = nights_on(["f" * 40, "e" * 40, "c" * 40])
    elif case == "settings":
        digests = {"tiny": "e" * 64}
    elif case == "other scenario":
        digests = {"tiny_other": DIGEST}
    elif case == "all failed":
        history = nights_on(shas[:3], duets={1: 1, 2: 1, 3: 3})
    p = plan(history, shas[3], repo, digests)
    assert p.mode == "history" and said in p.line and p.line.endswith("decided by the history alone")
    assert "\n" not in p.line
    assert outcomes.duet_outcome(p.mode) == (outcomes.EXIT_INCONCLUSIVE, outcomes.DUET_ALONE)


def duet_dir(tmp_path: Path, mode: str, base_runs: int, head_runs: int, slow: float = 1.15, commit: str = "ab") -> Path:
    """A duet's results dir as harness duet leaves it: compare's ``<side>/r<i>/<scenario>/`` and duet.json."""
    d = tmp_path / "duet"
    env = ENV | {"verl_commit": commit * 20, "cpu_model": "Xeon"}
    for i in range(base_runs):
        write_results(d / "base" / f"r{i}", "tiny", env=env | {"verl_commit": "ba" * 20}, dumps=False)
    for i in range(head_runs):
        write_results(d / "head" / f"r{i}", "tiny", env=env, dumps=False, profiled=10.0 * slow)
    DuetDoc(mode=mode, base_commit="ba" * 20, base_night="n1", exit_code=1, verdict="FAIL", lines=["duet line"]).write(
        d / "duet.json"
    )
    return d


def runs_dir(tmp_path: Path) -> Path:
    """The night's own results dir (verl commit abab..., the duet's head's)."""
    env = ENV | {"verl_commit": "ab" * 20, "cpu_model": "Xeon"}
    return write_results(tmp_path / "runs", "tiny", env=env, dumps=False).parent


def test_append_records_both_sides_head_runs_join_the_night(tmp_path, capsys):
    night_dir = runs_dir(tmp_path)
    duet = duet_dir(tmp_path, "duet", 2, 3)
    h = tmp_path / "h.json"
    assert main(["history", "append", str(h), str(night_dir), "--duet", str(duet), "--date", "2026-12-01"]) == 0
    assert "duet (duet): FAIL; duet line" in capsys.readouterr().out
    got = History.read(h).nights[0]
    assert len(got.scenarios["tiny"]) == 4 and got.duet is not None and len(got.duet.base_runs["tiny"]) == 2
    assert got.duet.ratios["tiny"]["overhead.wall.profiled"] == pytest.approx(1.15, rel=1e-3)
    assert (got.duet.mode, got.duet.base_commit, got.duet.exit_code) == ("duet", "ba" * 20, 1)
    assert json.loads(h.read_text())["nights"][0]["duet"]["base_runs"]["tiny"][0]["status"] == "ok"
    # the page of the nights shows both sides
    assert main(["history", "publish", str(h), "--out", str(tmp_path / "site")]) == 0
    page = "".join(p.read_text() for p in (tmp_path / "site").glob("*.html"))
    assert "side by side (the duet)" in page and "FAIL against babababab" in page
    assert "2 base runs, 4 of tonight&#x27;s; head/base wall.first_profiled 1.150x, wall.profiled 1.150x" in page


def test_a_duet_of_one_side_is_recorded_as_not_side_by_side(tmp_path, capsys):
    night_dir = runs_dir(tmp_path)
    duet = duet_dir(tmp_path, "duet", 0, 2)
    h = tmp_path / "h.json"
    assert main(["history", "append", str(h), str(night_dir), "--duet", str(duet), "--date", "2026-12-01"]) == 0
    out = capsys.readouterr().out
    assert "the duet (duet) holds no base run: recorded as not side by side, this night's overhead is decided by the " \
           "history alone" in out  # fmt: skip
    got = History.read(h).nights[0].duet
    assert got is not None and (got.mode, got.exit_code) == ("history", outcomes.EXIT_INCONCLUSIVE)


def test_a_duet_of_another_night_is_refused_in_one_line(tmp_path, capsys):
    night_dir = runs_dir(tmp_path)
    duet = duet_dir(tmp_path, "duet", 1, 1, commit="cd")
    h = tmp_path / "h.json"
    assert main(["history", "append", str(h), str(night_dir), "--duet", str(duet)]) == 2
    err = capsys.readouterr().err.strip()
    assert "the duet's head ran verl_commit 'cdcdcdcd" in err and "\n" not in err and not h.exists()


def test_duet_without_a_base_runs_nothing_and_warns(tmp_path, capsys):
    """No history yet: nothing trains, duet.json says why, exit 3 (the job's warning), never a silent pass."""
    repo, _ = clone(tmp_path, 1)
    out = tmp_path / "out"
    code = main(["duet", "scenarios/tiny_fsdp_l1.yaml", "--history", str(tmp_path / "none.json"), "--verl", str(repo),
                 "--results", str(out)])  # fmt: skip
    said = capsys.readouterr().out
    assert code == outcomes.EXIT_INCONCLUSIVE and "the history holds no night yet" in said
    doc = DuetDoc.read(out / "duet.json")
    assert (doc.mode, doc.verdict) == ("history", outcomes.DUET_ALONE) and not (out / "base").exists()


def test_duet_refuses_a_release_or_a_dirty_checkout(tmp_path, capsys):
    repo, _ = clone(tmp_path, 1)
    (repo / "f").write_text("changed")
    for verl in ("0.9.1", str(repo)):
        code = main(["duet", "scenarios/tiny_fsdp_l1.yaml", "--history", "h.json", "--verl", verl, "--results",
                     str(tmp_path / "o")])  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert code == 2 and "a duet runs tonight's verl as a commit of a local clone" in err and "\n" not in err


def _ci_history(tmp_path: Path, *argv: str, name: str = "job") -> subprocess.CompletedProcess[str]:
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env |= {"RESULTS": str(tmp_path / name), "PYTHON": sys.executable, "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}
    return subprocess.run(["bash", ".ci/history", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip


@pytest.mark.integration
def test_the_nightly_reads_the_history_read_only_and_appends_its_duet(tmp_path, capsys):
    """.ci/history fetch copies the branch's file (absent branch: a notice, no file; an unreadable remote: an error
    annotation, exit 0: the night runs and its duet says it has no base), and .ci/history night appends
    FILE=RUNS:DUET as one night holding the duet."""
    from test_history_branch import BRANCH, nights_on_branch, seed

    out = tmp_path / "read" / "nights.json"
    proc = _ci_history(tmp_path, "fetch", str(tmp_path / "absent.git"), BRANCH, "cpu.json", str(out))
    assert proc.returncode == 0 and not out.exists()
    assert "::error title=precision_debugger history::cannot read the history branch" in proc.stdout
    bare = seed(tmp_path, capsys, [(1, 1.0), (2, 1.0)])
    proc = _ci_history(tmp_path, "fetch", str(bare), "other-branch", "cpu.json", str(out))
    assert proc.returncode == 0 and not out.exists() and "::notice" in proc.stdout
    proc = _ci_history(tmp_path, "fetch", str(bare), BRANCH, "cpu.json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(History.read(out).nights) == 2
    runs = runs_dir(tmp_path)
    duet = duet_dir(tmp_path, "duet", 2, 2)
    proc = _ci_history(tmp_path, "night", str(bare), BRANCH, f"cpu.json={runs}:{duet}", name="night")
    assert "duet (duet): FAIL; duet line" in proc.stdout, proc.stdout + proc.stderr
    assert nights_on_branch(bare) == 3
    got = json.loads(subprocess.run(["git", "show", f"{BRANCH}:cpu.json"], cwd=bare, capture_output=True, text=True,
                                    check=True).stdout)["nights"][-1]  # fmt: skip
    assert got["duet"]["mode"] == "duet" and len(got["scenarios"]["tiny"]) == 3


def test_the_nightlys_gate_leaves_overhead_to_the_duet(tmp_path, capsys):
    """With a duet the nightly gates disk and structure against the previous baseline (gate --judge disk,structure):
    one unpaired pair's overhead, twice the baseline's, is reported there, not decided."""
    for i in range(3):
        write_results(tmp_path / f"cal{i}", dumps=True)
    base = tmp_path / "baseline.json"
    assert main(["baseline", "merge", *(str(tmp_path / f"cal{i}") for i in range(3)), "-o", str(base)]) == 0
    write_results(tmp_path / "now", profiled=20.0)
    assert main(["gate", "--baseline", str(base), "--results", str(tmp_path / "now")]) == outcomes.EXIT_FAIL
    capsys.readouterr()
    judged = main(["gate", "--baseline", str(base), "--results", str(tmp_path / "now"), "--judge", "disk,structure"])
    assert judged == outcomes.EXIT_PASS, capsys.readouterr().out


def test_a_duet_regression_plans_the_overhead_bisect_over_its_range(tmp_path, capsys):
    """The newest night's duet decided REGRESSED (tonight's verl against the last good night's, 3 first-parent commits
    apart): history check --json carries it and history bisects plans the bisect of its scenario over that range, as
    for a confirmed change point; the history's own verdict stays the history's (no change point: nothing to accept).
    An older night's duet regression, one that names no figure (a schema-3 record), or a noise record plan none."""
    history = nights_on([f"{i:040x}" for i in range(1, 6)])
    base, tonight = history.nights[1], history.nights[-1]
    regressed = Duet(mode="duet", base_commit=base.identity.verl_commit, base_night=base.id, exit_code=1,
                     verdict="FAIL", lines=["tonight's verl against the last good night"],
                     regressed={"tiny_fsdp_l1": [OVERHEAD_PROFILED]})  # fmt: skip
    h = tmp_path / "h.json"
    nights = [*history.nights[:-1], tonight.model_copy(update={"duet": regressed})]
    history.model_copy(update={"nights": nights}).write(h)
    assert main(["history", "check", str(h), "--json", str(tmp_path / "check.json")]) == 0  # the history: no change
    doc = HistoryCheckDoc.read_file(tmp_path / "check.json", 1 << 20)
    assert [(d.scenario, d.metrics, d.range) for d in doc.duet] == [
        ("tiny_fsdp_l1", [OVERHEAD_PROFILED], CheckRange(good=f"{2:040x}", bad=f"{5:040x}", commits=9))
    ]
    capsys.readouterr()
    assert main(["history", "bisects", str(tmp_path / "check.json")]) == 0
    assert capsys.readouterr().out == f"tiny_fsdp_l1 {2:040x} {5:040x}\n"
    for duet in (
        regressed.model_copy(update={"regressed": {}}),  # a schema-3 duet: no figure named
        regressed.model_copy(update={"mode": "noise", "base_commit": tonight.identity.verl_commit}),
    ):
        nights = [*history.nights[:-1], tonight.model_copy(update={"duet": duet})]
        history.model_copy(update={"nights": nights}).write(h)
        assert main(["history", "check", str(h), "--json", str(tmp_path / "check.json")]) == 0
        assert HistoryCheckDoc.read_file(tmp_path / "check.json", 1 << 20).bisects() == []
    nights = [*history.nights[:-2], history.nights[-2].model_copy(update={"duet": regressed}), tonight]
    history.model_copy(update={"nights": nights}).write(h)
    assert main(["history", "check", str(h), "--json", str(tmp_path / "check.json")]) == 0
    assert HistoryCheckDoc.read_file(tmp_path / "check.json", 1 << 20).duet == []  # last night's, not tonight's


def test_the_duet_record_names_the_figures_it_decided_regressed(tmp_path, capsys):
    night_dir = runs_dir(tmp_path)
    duet = duet_dir(tmp_path, "duet", 2, 2)
    doc = DuetDoc.read(duet / "duet.json")
    doc.model_copy(update={"regressed": {"tiny": [OVERHEAD_PROFILED]}}).write(duet / "duet.json")
    h = tmp_path / "h.json"
    assert main(["history", "append", str(h), str(night_dir), "--duet", str(duet), "--date", "2026-12-01"]) == 0
    got = History.read(h).nights[0].duet
    assert got is not None and got.regressed == {"tiny": [OVERHEAD_PROFILED]}
    one = json.loads((duet / "duet.json").read_text())  # a schema-1 record (before it named figures) still reads
    del one["regressed"]
    (duet / "duet.json").write_text(json.dumps(one | {"schema_version": 1}))
    assert DuetDoc.read(duet / "duet.json").regressed == {}


def test_a_schema_3_history_with_duets_reads_and_is_appended_as_schema_4(tmp_path, capsys):
    """The pool of the duet's series (benchmarks/data/duet_series_wait.json), written as schema 3 when the duet field
    joined it without a new schema: read (its duets, their base runs, no figure named regressed), checked, and
    written again as schema 4, every night with it."""
    pool = ROOT / "benchmarks" / "data" / "duet_series_wait.json"
    assert json.loads(pool.read_text())["schema_version"] == 3
    history = History.read(pool)
    duets = [n.duet for n in history.nights if n.duet is not None]
    assert len(duets) == 4 and [d.mode for d in duets] == ["history", "duet", "duet", "duet"]
    assert sum(len(r) for d in duets for r in d.base_runs.values()) == 15 and all(not d.regressed for d in duets)
    h = tmp_path / "h.json"
    h.write_bytes(pool.read_bytes())
    assert main(["history", "check", str(h)]) == 0 and "no change point in 6 series" in capsys.readouterr().out
    assert json.loads(h.read_text())["schema_version"] == 3  # check reads, never writes
    history.write(h)
    written = json.loads(h.read_text())
    assert written["schema_version"] == 4 and {n["schema_version"] for n in written["nights"]} == {4}
