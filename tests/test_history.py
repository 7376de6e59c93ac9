"""The history of nights (harness/history): the store, its series, Otava's change points and the verdict on them.

Nights are made by hand (a level per night, a few samples around it); the results dirs of ``append`` by
tests/gate_builders.py, as the harness leaves them. The real nights are benchmarks/history_power.py's (docs/history.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from gate_builders import ENV, write_results
from test_blame import harness
from verl_repo import VerlRepo

from harness.cli import main
from harness.history.detect import Settings, changes
from harness.history.night import night_of
from harness.history.series import read
from harness.history.store import History, HistoryError, Identity, Night, ScenarioRun, add, first_apart
from harness.history.verdict import accept, check_history

PROFILED = "overhead.wall.profiled"
FIRST = "overhead.wall.first_profiled"
STAGE = "overhead.wall.stage.actor_update"
# a night's offset from its level: the spread of a quiet nightly of one run (a few per cent), fixed so that every
# verdict below is the same on every run
NOISE = (0.012, -0.018, 0.004, 0.021, -0.009, -0.015, 0.017, -0.003, 0.008, -0.021, 0.013, -0.006, 0.019, -0.012)


def identity(i: int, **over: object) -> Identity:
    fields: dict[str, object] = {
        "date": f"2026-11-{i:02d}",
        "verl": "0.10.0.dev0",
        "verl_commit": f"{i:040x}",
        "verl_position": 100 + 3 * i,
        "series": "main",
        "msprobe": "26.2.0",
        "torch": "2.13.0+cpu",
        "device_kind": "cpu/x86_64",
        "processor": "Xeon 8370C",
        "image": None,
        "runner": f"runner-{i % 3}",
    }
    return Identity.model_validate(fields | over)


def night(
    i: int, level: float = 4.0, status: str = "ok", metrics: tuple[str, ...] = (PROFILED, STAGE), **over: object
) -> Night:
    """Night ``i`` (a day of November 2026, a verl commit of its own): each metric at ``level`` x its noise."""
    ident = identity(i, **over)
    value = level * (1 + NOISE[i % len(NOISE)])
    samples = {f"step{s}.rank{r}": value * (1 + 0.01 * (s - r - 3)) for s in (2, 4, 6, 8) for r in (0, 1)}
    run = ScenarioRun(
        source=f"src{i}-{level}-{status}",
        status=status,  # type: ignore[arg-type]
        why=[] if status == "ok" else ["verl crashed: Traceback ... ValueError"],
        figures={m: value for m in metrics} | {"disk.total_bytes": 1e6} if status == "ok" else {},
        samples={m: samples for m in metrics} if status == "ok" else {},
        tolerances={PROFILED: 0.075, STAGE: 0.15},
    )
    return Night(id=ident.night_id(), identity=ident, appended="2026-11-30T00:00:00+00:00", scenarios={"tiny": [run]})


def history_of(nights: list[Night]) -> History:
    h = History()
    for n in nights:
        h, _ = add(h, n)
    return h


def stepped(n: int, at: int, factor: float = 1.3, **over_after: object) -> list[Night]:
    """``n`` nights, the level x ``factor`` from night ``at`` on (with ``over_after`` in those nights' identity)."""
    return [night(i, 4.0 * (factor if i >= at else 1.0), **(over_after if i >= at else {})) for i in range(1, n + 1)]


def test_otava_analysis_pinned_on_known_series():
    """Otava's analysis module on the harness's numpy and scipy (not the ones its release pins): its change points
    and p-values on known series, pinned. A numpy, scipy or Otava upgrade that moves them fails here first."""
    from otava.analysis import compute_change_points

    quiet = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0, 1.02, 0.99, 1.01, 0.98]
    step = [*quiet, 1.15, 1.17, 1.14, 1.16, 1.18, 1.15]
    two = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 3.0, 3.1, 2.9, 3.05, 2.95, 3.0, 2.0, 2.05, 1.95, 2.1, 1.9, 2.0]
    got = {}
    for name, series in (("quiet", quiet), ("step", step), ("two", two)):
        found, _ = compute_change_points(series, window_len=30, max_pvalue=0.01)
        got[name] = [
            (int(c.index), float(f"{c.stats.pvalue:.3g}"), round(float(c.stats.forward_change_percent()), 2))
            for c in found
        ]
    assert got == {"quiet": [], "step": [(12, 1.9e-12, 15.83)], "two": [(6, 1.19e-10, 50.0), (12, 1.19e-10, -33.33)]}


def test_quiet_nights_pass():
    v = check_history(history_of([night(i) for i in range(1, 15)]))
    assert (v.exit_code, v.findings, v.judged, v.total) == (0, [], 2, 2)
    assert v.lines()[-1] == "history check: PASS"


def test_step_is_suspected_then_confirmed_with_its_commit_range():
    nights = stepped(13, at=10)
    codes = [check_history(history_of(nights[:n])).exit_code for n in range(2, 14)]
    assert codes[:8] == [0] * 8  # nights 2..9: quiet
    assert codes[8] == 3  # night 10, the step's first: suspected, waits for more nights
    assert codes[10] == 1  # night 12: confirmed after 2 further nights
    v = check_history(history_of(nights[:12]))
    regressed = [f for f in v.findings if f.status == "regressed"]
    assert {f.change.series.key.metric for f in regressed} == {PROFILED, STAGE}
    line = next(f.line for f in regressed if f.change.series.key.metric == PROFILED)
    before, after = nights[8], nights[9]
    assert line.startswith("REGRESSED: tiny overhead.wall.profiled (cpu/x86_64, Xeon 8370C): 1.3")
    assert f"last night before {before.id} (2026-11-09, verl {before.identity.verl_commit[:12]} (#127))" in line
    assert f"first after {after.id} (2026-11-10" in line
    assert f"verl commits {before.identity.verl_commit[:12]}..{after.identity.verl_commit[:12]} (3 commits)" in line
    assert f"history accept HISTORY tiny:{PROFILED}@{after.id}" in line
    bisect = (
        f"find the commit: python -m harness bisect scenarios/tiny.yaml --verl-repo VERL "
        f"--good {before.identity.verl_commit[:12]} --bad {after.identity.verl_commit[:12]} --check overhead"
    )
    assert bisect in line  # fmt: skip
    assert line.endswith(  # every finding ends with the command that reproduces it on a developer's machine
        f"reproduce: python -m harness compare scenarios/tiny.yaml --base https://github.com/verl-project/verl@"
        f"{before.identity.verl_commit[:12]} --head https://github.com/verl-project/verl@{after.identity.verl_commit[:12]}"
    )
    change = regressed[0].change
    assert change.low > 1 and change.low < change.size < change.high and change.confirmed and change.further == 2


def test_a_regression_one_commit_after_the_last_good_night_names_that_commit():
    nights = [night(i, 4.0 * (1.3 if i >= 10 else 1.0), verl_position=100 + i) for i in range(1, 13)]
    line = next(f.line for f in check_history(history_of(nights)).findings if f.status == "regressed")
    assert f"the commit: {nights[9].identity.verl_commit[:12]};" in line and "harness bisect" not in line


def test_a_slowdown_within_tolerance_passes():
    """x1.05: significant, under the profiled figure's 7.5 % (and the stage's 15 %): reported, not failed."""
    v = check_history(history_of(stepped(14, at=8, factor=1.05)))
    assert v.exit_code == 0
    assert v.findings and all(f.line.startswith("within tolerance") for f in v.findings)


def test_an_improvement_passes():
    v = check_history(history_of(stepped(14, at=8, factor=0.7)))
    assert v.exit_code == 0 and v.findings and all(f.line.startswith("improved") for f in v.findings)


def test_msprobe_change_is_named_as_the_likely_cause():
    v = check_history(history_of(stepped(13, at=9, msprobe="26.3.0")))
    assert v.exit_code == 1
    assert all("likely cause: msprobe 26.2.0 -> 26.3.0" in f.line for f in v.findings)


@pytest.mark.parametrize(("field", "value"), [("torch", "2.14.0+cpu"), ("image", "harness-cpu:2")])
def test_torch_or_image_change_is_not_blamed_on_verl(field, value):
    v = check_history(history_of(stepped(13, at=9, **{field: value})))
    assert v.exit_code == 2
    assert all(f.status == "environment" and "(the environment, not verl;" in f.line for f in v.findings)
    assert "CHANGED WITH THE ENVIRONMENT (not a verdict on verl)" in v.findings[0].line


def test_a_runner_of_another_cpu_model_switches_series_instead_of_alarming():
    """Hosted runners: nights alternate between two CPU models whose ratios differ by x1.3; keyed by processor,
    each model is a quiet series of its own."""
    nights = [night(i, 4.0 * (1.3 if i % 3 == 0 else 1.0), processor="EPYC 7763" if i % 3 == 0 else "Xeon 8370C")
              for i in range(1, 15)]  # fmt: skip
    v = check_history(history_of(nights))
    assert (v.exit_code, v.findings, v.total) == (0, [], 4)
    assert {k.processor for k in v.reading.series} == {"EPYC 7763", "Xeon 8370C"}


def test_accepted_change_stops_failing_and_is_shown():
    h = history_of(stepped(12, at=9))
    v = check_history(h)
    assert v.exit_code == 1
    for name in sorted({f.change.name for f in v.findings}):
        h = accept(h, name, "msprobe's statistics of backward tensors, on purpose")
    h, _ = add(h, night(13, 5.2))
    v = check_history(h)
    assert v.exit_code == 0
    assert all(f.line.startswith("accepted: ") and "on purpose" in f.line for f in v.findings)
    gone = h.model_copy(update={"nights": h.nights[:7]})
    held = check_history(gone).lines()  # the change gone: the acceptance still said
    assert any(
        n.startswith("accepted tiny:overhead.wall.") and n.endswith("no change point is there now") for n in held
    )
    with pytest.raises(HistoryError, match="no such change point in the history now"):
        accept(h, "tiny:overhead.wall.profiled@0000000000", "why")
    with pytest.raises(HistoryError, match="already accepted"):
        accept(h, v.findings[0].change.name, "again")


def test_a_crashed_night_is_kept_marked_and_no_point():
    nights = [night(i) for i in range(1, 8)] + [night(8, status="crashed")] + [night(i) for i in range(9, 13)]
    h = history_of(nights)
    v = check_history(h)
    assert len(h.nights) == 12 and v.exit_code == 0
    assert all(len(s.points) == 11 for s in v.reading.series.values())
    assert any(f"night {nights[7].id} (2026-11-08) crashed (kept, not a point): verl crashed" in n for n in v.lines())


def test_a_figure_that_appears_or_disappears_is_said():
    nights = [night(i, metrics=(PROFILED,) if i < 5 else (PROFILED, STAGE)) for i in range(1, 10)]
    nights += [night(i, metrics=(STAGE,)) for i in range(10, 12)]
    notes = read(history_of(nights)).notes
    assert any(f"tiny {STAGE} (cpu/x86_64, Xeon 8370C): appears at night {nights[4].id}" in n for n in notes)
    assert any(f"tiny {PROFILED} (cpu/x86_64, Xeon 8370C): disappears after night {nights[8].id}" in n for n in notes)


def test_empty_and_one_night_histories_compare_nothing():
    v = check_history(History())
    assert v.exit_code == 2 and "no nights in the history" in "\n".join(v.lines())
    v = check_history(history_of([night(1)]))
    assert v.exit_code == 2
    assert v.lines()[-1] == "history check: NOTHING COMPARED (0 of 2 overhead series had two nights or more)"


def test_same_identity_merges_older_night_refused_cap_prunes():
    h = history_of([night(1), night(2)])
    twin = night(2).model_copy(
        update={"scenarios": {"tiny": [night(2).scenarios["tiny"][0].model_copy(update={"source": "other"})]}}
    )
    h2, lines = add(h, twin)
    assert len(h2.nights) == 2 and len(h2.nights[-1].scenarios["tiny"]) == 2 and lines[0].startswith("merged")
    with pytest.raises(HistoryError, match=r"night of 2026-11-01 is older than the newest night \(2026-11-02\)"):
        add(h, night(1).model_copy(update={"scenarios": {"tiny": []}}))
    back = night(3, verl_position=50)
    with pytest.raises(HistoryError, match="older in verl's first-parent history"):
        add(h, back)
    h3, lines = add(h, night(3), keep=2)
    assert [n.identity.date for n in h3.nights] == ["2026-11-02", "2026-11-03"] and h3.pruned == 1
    assert lines[-1] == "pruned the 1 oldest night (2026-11-01 to 2026-11-01): the history keeps 2"


def test_append_reads_a_results_dir_and_refuses_it_twice(tmp_path):
    results = tmp_path / "r"
    write_results(results, "tiny_case", env=ENV | {"cpu_model": "Xeon", "device_kind": "cpu/x86_64"}, dumps=False)
    n = night_of(results, "2026-11-01", "r1")
    run = n.scenarios["tiny_case"][0]
    assert (n.identity.processor, n.identity.msprobe, n.identity.torch) == ("Xeon", "26.2.0", "2.13.0+cpu")
    assert run.status == "ok"
    assert run.tolerances == {PROFILED: 0.075, "overhead.wall.unprofiled": 0.25, STAGE: 0.15, FIRST: 0.15}
    # the first profiled step (2) a figure of its own, left out of the profiled step's and the stage's series
    assert sorted(run.samples[PROFILED]) == sorted(run.samples[STAGE]) == ["step4.rank0", "step4.rank1"]
    assert sorted(run.samples[FIRST]) == ["step2.rank0", "step2.rank1"]
    unprofiled = ["step3.rank0", "step3.rank1", "step5.rank0", "step5.rank1"]
    assert sorted(run.samples["overhead.wall.unprofiled"]) == unprofiled
    # one statistic: the figure is its samples' geometric mean (10 x 1.0 and 10 x 1.02), not the check's median
    assert run.figures[PROFILED] == pytest.approx(10 * (1.02**0.5), abs=1e-4)
    assert run.figures[FIRST] == pytest.approx(10 * (0.98**0.5), abs=1e-4)
    h, _ = add(History(), n)
    with pytest.raises(HistoryError, match="already in the history as night"):
        add(h, night_of(results, "2026-11-02", "r1"))


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["history", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_append_check_accept(tmp_path, capsys):
    h = tmp_path / "h" / "history.json"
    for i in range(1, 13):
        r = tmp_path / f"night{i}"
        env = ENV | {"verl_commit": f"{i:040x}", "cpu_model": "Xeon"}
        write_results(r, env=env, dumps=False, profiled=10.0 * (1.4 if i >= 9 else 1) * (1 + NOISE[i]))
        code, out, err = _cli(capsys, "append", str(h), str(r), "--date", f"2026-11-{i:02d}", "--runner", "x")
        assert (code, err) == (0, "") and f"{h}: {i} nights" in out
    code, out, _ = _cli(capsys, "check", str(h))
    assert code == 1 and "REGRESSED: tiny_case overhead.wall.profiled" in out
    changes = [part.split()[0] for part in out.split("history accept HISTORY ")[1:]]
    assert [c.split("@")[0] for c in changes] == [f"tiny_case:{FIRST}", f"tiny_case:{PROFILED}"]
    for change in changes:
        code, out, _ = _cli(capsys, "accept", str(h), change, "--reason", "richer statistics")
        assert code == 0 and out.startswith(f"accepted {change}")
    code, out, _ = _cli(capsys, "check", str(h))
    assert code == 0 and "'richer statistics'" in out
    before = h.read_bytes()
    code, _, err = _cli(capsys, "append", str(h), str(tmp_path / "night12"))
    assert code == 2 and err.startswith("HISTORY ERROR: ") and "already in the history" in err
    assert h.read_bytes() == before and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"schema_version": 1, "nights": [', "not valid JSON"),
        ("", "not valid JSON"),
        ('{"schema_version": 7, "nights": []}', "written by schema 7, this harness reads schemas 2, 3 and 4"),
        ('{"schema_version": 4, "nights": [{"schema_version": 2, "identity": {"date": "2026-11-01"}}]}',
         "night 1 (2026-11-01) was appended by schema 2, the file is schema 4: a mixed-version history"),
        ('{"schema_version": 3, "nights": [{"schema_version": 3, "identity": {"date": "2026-11-01"}}, '
         '{"schema_version": 4, "identity": {"date": "2026-11-02"}}]}',
         "night 2 (2026-11-02) was appended by schema 4, the file is schema 3: a mixed-version history"),
    ],
)  # fmt: skip
def test_a_broken_history_is_one_line_and_left_alone(tmp_path, capsys, text, said):
    h = tmp_path / "history.json"
    h.write_text(text)
    write_results(tmp_path / "r", dumps=False)
    for argv in (["check", str(h)], ["append", str(h), str(tmp_path / "r")]):
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and err.startswith(f"HISTORY ERROR: {h}: ") and said in err and len(err.splitlines()) == 1
    assert h.read_text() == text


def test_check_of_a_missing_history(tmp_path, capsys):
    for argv in (["check"], ["accept", "--reason", "r"]):
        code, _, err = _cli(
            capsys, argv[0], str(tmp_path / "none.json"), *(["x:y@z"] if len(argv) > 1 else []), *argv[1:]
        )
        assert code == 2 and err.startswith("HISTORY ERROR: ") and "no such file" in err
    assert not list(tmp_path.iterdir())


def test_the_written_history_is_versioned(tmp_path, capsys):
    h = tmp_path / "history.json"
    write_results(tmp_path / "r", dumps=False)
    run = "https://github.com/verl-project/verl/actions/runs/123"
    _cli(capsys, "append", str(h), str(tmp_path / "r"), "--date", "2026-11-01", "--run-url", run)
    doc = json.loads(h.read_text())
    assert doc["schema_version"] == 4 and doc["nights"][0]["schema_version"] == 4 and doc["nights"][0]["run"] == run
    identity = set(doc["nights"][0]["identity"])
    assert identity >= {"verl_commit", "verl_position", "msprobe", "torch", "processor", "image", "runner", "date",
                        "harness", "scenarios"}  # fmt: skip


def test_one_night_has_no_change_point():
    series = read(history_of([night(1)])).series
    assert series and all(changes(s, Settings()) == [] for s in series.values())


def test_check_help_and_exit_meanings_come_from_outcomes():
    from harness import outcomes

    assert outcomes.HISTORY_EXIT == {"regressed": 1, "environment": 2, "suspected": 3, "ok": 0}
    assert outcomes.history_final(["ok", "suspected"], 2, 2) == (3, "INCONCLUSIVE")
    assert outcomes.history_final(["suspected", "regressed"], 1, 2) == (1, "FAIL (1 of 2 overhead series judged)")


@pytest.mark.trains
def test_real_nights_of_verl_commits_appended_and_checked(repo: VerlRepo, cache: Path, small: Path, tmp_path: Path):
    """Two nights of real trainings (the small tiny_fsdp_l1), a verl commit each from the test repository: the
    release, then a commit that raises inside a profiled stage (a crashed night: kept, marked, no point, so one night
    of the series: nothing compared). Their identities come from the runs: verl's commit and first-parent position,
    the versions, the device kind."""
    history = tmp_path / "history.json"
    scenario = str(small / "scenarios" / "tiny_fsdp_l1.yaml")
    for day, ref in enumerate(("release", "crash"), 1):
        results = tmp_path / ref
        run = harness(cache, "run", scenario, "--verl", f"{repo.path}@{getattr(repo, ref)}", "--results", str(results))
        assert run.returncode == day - 1, run.stdout[-3000:]
        append = harness(cache, "history", "append", str(history), str(results), "--date", f"2026-11-0{day}")
        assert append.returncode == 0 and f"{history}: {day} nights" in append.stdout, append.stdout + append.stderr
    again = harness(cache, "history", "append", str(history), str(tmp_path / "release"), "--date", "2026-11-04")
    assert again.returncode == 2 and "already in the history as night" in again.stderr
    nights = History.read(history).nights
    assert [(n.identity.verl_commit, n.identity.verl_position) for n in nights] == [(repo.release, 1), (repo.crash, 2)]
    assert {(n.identity.msprobe, n.identity.torch, n.identity.device_kind) for n in nights} == {
        ("26.2.0", "2.13.0+cpu", "cpu/x86_64")
    }
    ok, crashed = (n.scenarios["tiny_fsdp_l1"][0] for n in nights)
    assert ok.status == "ok" and set(ok.samples[PROFILED]) == {"step2.rank0"}
    assert crashed.status == "crashed" and "AttributeError" in crashed.why[0] and not crashed.samples
    check = harness(cache, "history", "check", str(history))
    assert check.returncode == 2, check.stdout
    assert f"tiny_fsdp_l1: night {nights[1].id} (2026-11-02) crashed (kept, not a point): verl crashed" in check.stdout
    assert check.stdout.splitlines()[-1].startswith("history check: NOTHING COMPARED (0 of ")


def test_a_schema_2_history_reads_with_its_first_profiled_step_apart(tmp_path, capsys):
    """Last night's history, written before the first profiled step was a figure of its own and before nights held
    the harness's commit and the scenario files: read as schema 3 (the same split made on its samples, the geometric
    mean its figures), checked, and appended to."""
    h = tmp_path / "history.json"
    for i in (1, 2):
        write_results(tmp_path / f"r{i}", dumps=False, env=ENV | {"verl_commit": f"{i:02x}" * 20})
    _cli(capsys, "append", str(h), str(tmp_path / "r1"), "--date", "2026-11-01")
    doc = json.loads(h.read_text())
    (night3,) = doc["nights"]
    run = night3["scenarios"]["tiny_case"][0]
    old_run = run | {  # as schema 2 kept it: every sample, the check's figures, no first profiled step
        "figures": {k: v for k, v in run["figures"].items() if k != FIRST} | {PROFILED: 10.0},
        "samples": {k: v for k, v in run["samples"].items() if k != FIRST}
        | {PROFILED: run["samples"][PROFILED] | run["samples"][FIRST]},
        "tolerances": {k: v for k, v in run["tolerances"].items() if k != FIRST},
    }
    identity = {k: v for k, v in night3["identity"].items() if k not in ("harness", "scenarios")}
    old_night = night3 | {"schema_version": 2, "identity": identity, "scenarios": {"tiny_case": [old_run]}}
    h.write_text(json.dumps(doc | {"schema_version": 2, "nights": [old_night]}))
    (read,) = History.read(h).nights
    assert read.scenarios["tiny_case"][0] == ScenarioRun.model_validate(run)  # the split schema 3 makes on append
    assert (read.identity.harness, read.identity.scenarios) == (None, {})
    code, out, _ = _cli(capsys, "check", str(h))
    assert code == 2 and "1 night(s): a series needs two nights or more" in out  # read: one night, nothing compared
    code, _, err = _cli(capsys, "append", str(h), str(tmp_path / "r2"), "--date", "2026-11-02")
    assert (code, err) == (0, "") and json.loads(h.read_text())["schema_version"] == 4
    assert _cli(capsys, "append", str(h), str(tmp_path / "r1"), "--run-url", "javascript:alert(1)")[0] == 2


def test_the_first_profiled_step_is_apart_where_later_ones_are():
    """Four profiled steps: the first (msprobe's set-up, x1.8 here) out of the profiled step's and each stage's
    series, the profiled step's first one a figure of its own; one profiled step: its figures are that step's."""
    samples = {f"step{n}.rank{r}": 4.0 * (1.8 if n == 2 else 1.0) for n in (2, 4, 6, 8) for r in (0, 1)}
    figures, kept, tolerances = first_apart(
        {PROFILED: 4.4, STAGE: 4.4, "overhead.wall.unprofiled": 1.0},
        {PROFILED: samples, STAGE: samples, "overhead.wall.unprofiled": {"step3.rank0": 1.0, "step5.rank0": 1.1}},
        {PROFILED: 0.075, STAGE: 0.15, "overhead.wall.unprofiled": 0.25},
    )
    assert figures[PROFILED] == figures[STAGE] == 4.0 and figures[FIRST] == 7.2
    assert sorted(kept[FIRST]) == ["step2.rank0", "step2.rank1"] and len(kept[PROFILED]) == len(kept[STAGE]) == 6
    assert figures["overhead.wall.unprofiled"] == pytest.approx((1.1) ** 0.5, abs=1e-4)  # no profiled step in it
    assert tolerances[FIRST] == 0.15
    one = {"step3.rank0": 2.0, "step3.rank1": 2.42}
    figures, kept, tolerances = first_apart({PROFILED: 2.2}, {PROFILED: one}, {PROFILED: 0.075})
    assert figures == {PROFILED: 2.2} and kept == {PROFILED: one} and FIRST not in tolerances


@pytest.mark.parametrize(
    ("field", "said"),
    [("harness", "the harness 000000000000 -> 111111111111"),
     ("scenarios", "the scenario file scenarios/tiny.yaml (sha256 aaaaaaaaaaaa -> bbbbbbbbbbbb)")],
)  # fmt: skip
def test_a_harness_or_scenario_file_change_is_the_environment_never_verl(field, said):
    """A harness commit or a scenario edit that moves the figures (both have) between two nights: an environment
    change, exit 2 until accepted, never verl's commit range blamed nor bisected."""
    before, after = ("0" * 40, "1" * 40) if field == "harness" else ({"tiny": "a" * 64}, {"tiny": "b" * 64})
    nights = [night(i, 4.0 * (1.3 if i >= 9 else 1.0), **{field: after if i >= 9 else before}) for i in range(1, 13)]
    v = check_history(history_of(nights))
    assert v.exit_code == 2 and v.findings
    assert all(f.status == "environment" and said in f.line and "harness bisect" not in f.line for f in v.findings)
    unknown = [night(i, 4.0 * (1.3 if i >= 9 else 1.0), **({field: after} if i >= 9 else {})) for i in range(1, 13)]
    assert check_history(history_of(unknown)).exit_code == 1  # a schema-2 night's harness, files unknown: verl's range


def test_one_scenario_a_results_dir_is_one_night_with_each_scenario_file():
    """The Ascend nightly appends a results dir a scenario to one night: their scenario files merged into its
    identity; the same scenario with another file is another night."""
    a, b = night(1, scenarios={"tiny": "a" * 64}), night(1, scenarios={"other": "c" * 64})
    b = b.model_copy(update={"scenarios": {"other": [b.scenarios["tiny"][0].model_copy(update={"source": "other"})]}})
    h, lines = add(history_of([a]), b)
    assert lines[0].startswith("merged") and h.nights[-1].identity.scenarios == {"tiny": "a" * 64, "other": "c" * 64}
    _, lines = add(h, night(1, scenarios={"tiny": "b" * 64}).model_copy(update={"scenarios": {}}))
    assert lines[0].startswith("night ") and lines[0].endswith(" appended")


def test_night_of_reads_the_harness_commit_and_the_scenario_file(tmp_path):
    env = ENV | {"cpu_model": "Xeon", "harness": "c" * 40, "scenario_sha256": "d" * 64}
    write_results(tmp_path / "r", "tiny_a", env=env, dumps=False)
    write_results(tmp_path / "r", "tiny_b", env=env | {"scenario_sha256": "e" * 64}, dumps=False)
    ident = night_of(tmp_path / "r", "2026-11-01", "r1").identity
    assert (ident.harness, ident.scenarios) == ("c" * 40, {"tiny_a": "d" * 64, "tiny_b": "e" * 64})
    write_results(tmp_path / "s", "tiny_a", env=env, dumps=False)
    write_results(tmp_path / "s", "tiny_b", env=env | {"harness": "f" * 40}, dumps=False)
    with pytest.raises(HistoryError, match=r"tiny_b: harness 'f{40}' but tiny_a: 'c{40}': one night is one install"):
        night_of(tmp_path / "s", "2026-11-01", "r1")


EVIL = "x\n::error title=all good::merge it ##[error]merge it"  # each a workflow command, unescaped


def _forged(tmp_path: Path) -> Path:
    """A history whose every text field from outside is a workflow command of its own, unescaped: 12 nights, the
    profiled step 1.3x slower from night 9, when msprobe (the likely cause printed) changed too."""
    h = tmp_path / "h.json"
    h.write_text(history_of(stepped(12, at=9, msprobe="26.3.0")).model_dump_json())
    doc = json.loads(h.read_text())
    for n in doc["nights"]:
        n["identity"] |= {"runner": EVIL, "verl": EVIL, "torch": EVIL, "processor": EVIL, "device_kind": EVIL}
        n["identity"]["msprobe"] += EVIL
        n["results"] = [EVIL]
    doc["nights"][0]["scenarios"]["tiny"][0] |= {"status": "crashed", "why": [EVIL], "figures": {}, "samples": {}}
    doc["accepted"] = [{"change": EVIL, "reason": EVIL, "accepted": EVIL}]
    h.write_text(json.dumps(doc))
    return h


def test_text_from_a_history_is_printed_one_line_each_never_a_workflow_command(tmp_path, capsys):
    """A history is data from outside (a pull request's run, a hand): each field it holds is printed escaped on its
    line (harness.outside.shown) by every command that prints it, and stored so in what they write (check --json,
    whose lines the morning's issue and the step summary take)."""
    h = _forged(tmp_path)
    printed = []
    code, out, err = _cli(capsys, "check", str(h), "--json", str(tmp_path / "c.json"))
    assert code == 1 and "REGRESSED: tiny overhead.wall.profiled (x\\n::error title=all good::merge it #\\#[" in out
    printed += [out, err]
    change = next(c for c in out.split("history accept HISTORY ")[1:]).split()[0]
    code, out, err = _cli(capsys, "accept", str(h), change, "--reason", EVIL.replace("\n", " "))
    assert code == 0 and out.startswith(f"accepted {change}: 'x ::error"), out
    printed += [out, err]
    printed += _cli(capsys, "accept", str(h), "##[error]no", "--reason", "r")[1:]
    write_results(tmp_path / "r", dumps=False, env=ENV | {"verl": EVIL, "cpu_model": EVIL})
    code, out, err = _cli(capsys, "append", str(tmp_path / "h2.json"), str(tmp_path / "r"), "--runner", "##[error]no")
    assert code == 0 and "verl x\\n::error" in out and History.read(tmp_path / "h2.json").nights[0].identity.runner == (
        "#\\#[error]no"
    )
    printed += [out, err]
    lines = [ln for text in printed for ln in text.splitlines()]
    assert [ln for ln in lines if ln.lstrip().startswith("::") or "##[" in ln] == []
    doc = json.loads((tmp_path / "c.json").read_text())
    assert all("\n" not in ln and "##[" not in ln for ln in [*doc["lines"], *(f["line"] for f in doc["findings"])])
    stored = History.read(h).nights[0].identity  # written again by accept: as it is shown
    assert stored.runner == json.loads(h.read_text())["nights"][0]["identity"]["runner"] == (
        "x\\n::error title=all good::merge it #\\#[error]merge it"
    )


def test_the_morning_issue_takes_a_history_line_as_one_line(tmp_path):
    from harness.report.issue import morning

    doc = json.loads(json.dumps({"schema_version": 2, "exit_code": 1, "verdict": "FAIL", "nightly_exit": 1,
                                 "nightly_verdict": "FAIL", "nights": 12, "lines": [], "findings": []}))  # fmt: skip
    doc["findings"] = [{"status": "regressed", "accepted": False, "scenario": "tiny", "metric": PROFILED,
                        "change": "c", "line": f"REGRESSED: {EVIL}\n## a heading", "range": None}]  # fmt: skip
    (tmp_path / "c-check.json").write_text(json.dumps(doc))
    body = morning([], [tmp_path / "c-check.json"]).body("t", "", [])
    (line,) = [ln for ln in body.splitlines() if "REGRESSED" in ln]
    assert line.startswith("- REGRESSED: x\\n::error") and line.endswith("\\n## a heading")


def test_append_keeps_the_history_files_mode(tmp_path, capsys):
    """A history another job publishes (its page, the branch) stays readable: append writes a new file over it
    with the old file's mode, never the temp file's 0600; a new one gets the umask's."""
    h = tmp_path / "history.json"
    for i, mode in ((1, None), (2, 0o644), (3, 0o664)):
        write_results(tmp_path / f"r{i}", dumps=False, env=ENV | {"verl_commit": f"{i:02x}" * 20})
        if mode is not None:
            h.chmod(mode)
        assert _cli(capsys, "append", str(h), str(tmp_path / f"r{i}"), "--date", f"2026-11-0{i}")[0] == 0
        umask = os.umask(0)
        os.umask(umask)
        assert h.stat().st_mode & 0o777 == (0o666 & ~umask if mode is None else mode)


def test_check_and_publish_take_no_lock_append_and_accept_do(tmp_path, capsys):
    """A reader takes no lock (it reads a whole file, old or new: a history on a read-only place is read as any
    other, tests/bad_input_rows.py 5.7); a writer does, and a lock it cannot take is one line naming the history."""
    h = tmp_path / "h" / "history.json"
    h.parent.mkdir()
    h.write_text(history_of([night(i) for i in range(1, 4)]).model_dump_json())
    assert _cli(capsys, "check", str(h))[0] == 0
    assert main(["history", "publish", str(h), "--out", str(tmp_path / "site")]) == 0
    assert sorted(p.name for p in h.parent.iterdir()) == ["history.json"]
    (h.parent / ".history.json.lock").symlink_to(tmp_path / "elsewhere")
    write_results(tmp_path / "r", dumps=False)
    code, _, err = _cli(capsys, "append", str(h), str(tmp_path / "r"))
    assert code == 2 and err == f"ERROR: {h.parent / '.history.json.lock'}: a symbolic link: files are written in " \
        "place, never through a link (remove it)\n"
    assert not (tmp_path / "elsewhere").exists()


def test_a_harness_bug_in_append_writes_nothing_into_the_results_dir_read(tmp_path, capsys, monkeypatch):
    import harness.cli.history

    def bug(*_: object, **__: object) -> None:
        raise RuntimeError("a harness bug")

    monkeypatch.setattr(harness.cli.history, "night_of", bug)
    write_results(tmp_path / "r", dumps=False)
    before = sorted(p.name for p in (tmp_path / "r").iterdir())
    code, _, err = _cli(capsys, "append", str(tmp_path / "h.json"), str(tmp_path / "r"))
    assert code == 2 and err.startswith("HARNESS ERROR") and "traceback in" not in err
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == before


def test_the_page_is_written_only_where_it_is_its_own(tmp_path, capsys):
    """publish rewrites its own directory (its marker) and refuses any other that is not empty; a history built in
    code (not read, so not checked as read) with a scenario named as the page's own file is refused too."""
    from harness.report.nights import MARKER, publish

    h = tmp_path / "h.json"
    h.write_text(history_of([night(i) for i in range(1, 3)]).model_dump_json())
    site = tmp_path / "site"
    for _ in range(2):
        assert main(["history", "publish", str(h), "--out", str(site)]) == 0
    assert sorted(p.name for p in site.iterdir()) == sorted([MARKER, "index.html", "tiny.html"])
    capsys.readouterr()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert main(["history", "publish", str(h), "--out", str(tmp_path / "other")]) == 2
    assert "holds files the page of the nights did not write" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["notes.txt"]
    history = History.read(h)
    first = history.nights[0].model_copy(update={"scenarios": {"index": history.nights[0].scenarios["tiny"]}})
    with pytest.raises(HistoryError, match="scenario 'index': 'index' is the name of the page of the nights' own"):
        publish(history.model_copy(update={"nights": [first]}), tmp_path / "code", "https://x")
    assert not list((tmp_path / "code").iterdir())
