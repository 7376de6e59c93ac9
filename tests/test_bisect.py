"""``harness bisect``: the search on generated linear histories (the bad commit at every position, skipped
commits, a runner that fails once), its bad input as one line, and one bisection of real trainings.

The generated histories are git repositories whose commits say what they are in their own files (a commit that
breaks the profiler, one that cannot be installed); the probe reads the commit, as the real one installs it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from builders import write_scenario
from conftest import SMALL_TARGET
from verl_repo import PROFILE, VerlRepo, git

from harness.artifacts.figures import OVERHEAD_PROFILED, OVERHEAD_UNPROFILED, overhead_stage
from harness.cli import main
from harness.gate.judge import ComparePolicy, FigureVerdict, Judgement, ScenarioVerdict
from harness.pipeline.probes import ProbeRule
from harness.report.verdicts import probe_figure
from harness.targets.commits import BisectError, Commit, EndpointUndecided, Probe, bisect, first_parent

ROOT = Path(__file__).resolve().parents[1]
BROKEN = "skip actor_update"
UNINSTALLABLE = "syntax error in setup"


def linear_history(
    root: Path, n: int, bad_from: int, skipped: frozenset[int] = frozenset(), fixed_from: int | None = None
) -> list[str]:
    """``n`` commits on main, oldest first: commit ``bad_from`` breaks the profiler (``fixed_from`` mends it), the
    ``skipped`` ones cannot be installed."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "verl").mkdir()
    (root / "verl" / "__init__.py").write_text("")
    shas = []
    for i in range(n):
        broken = i >= bad_from and (fixed_from is None or i < fixed_from)
        (root / "verl" / "profile.py").write_text(f"# commit {i}\n" + (f"# {BROKEN}\n" if broken else ""))
        (root / "setup.py").write_text(UNINSTALLABLE if i in skipped else "")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"change {i}")
        shas.append(git(root, "rev-parse", "HEAD"))
    return shas


def reading_probe(repo: Path, calls: list[str]) -> Callable[[Commit], Probe]:
    """The verdict each commit's own files give (what installing and running it would find)."""

    def probe(c: Commit) -> Probe:
        calls.append(c.sha)
        if git(repo, "show", f"{c.sha}:setup.py") == UNINSTALLABLE:
            return Probe("skip", why="cannot be installed")
        broken = BROKEN in git(repo, "show", f"{c.sha}:verl/profile.py")
        return Probe("fail" if broken else "pass", {"layout": ("FAIL", "0/2 dirs") if broken else ("pass", "2/2 dirs")})

    return probe


def test_first_bad_commit_at_every_position_of_16_in_at_most_4_probes(tmp_path: Path) -> None:
    for bad in range(1, 16):
        repo = tmp_path / f"r{bad}"
        shas = linear_history(repo, 16, bad)
        commits = first_parent(str(repo), shas[0], "main", "--good", "--bad")
        assert [c.sha for c in commits] == shas and commits[bad].subject == f"change {bad}"
        calls: list[str] = []
        out = bisect(commits, reading_probe(repo, calls), say=lambda _: None)
        assert out.found and out.first.sha == shas[bad], bad
        assert calls[:2] == [shas[0], shas[15]] and len(calls) - 2 <= 4, (bad, len(calls))
        assert out.flips == ["layout: pass -> FAIL (0/2 dirs)"] and out.last_old.sha == shas[bad - 1]
        assert f"first bad commit: {shas[bad]} change {bad}" in out.lines()


def test_find_fix_names_the_first_good_commit(tmp_path: Path) -> None:
    for fixed in (1, 7, 15):
        repo = tmp_path / f"r{fixed}"
        shas = linear_history(repo, 16, 0, fixed_from=fixed)
        commits = first_parent(str(repo), shas[0], shas[15], "--bad", "--good")
        out = bisect(commits, reading_probe(repo, []), find="fix", say=lambda _: None)
        assert out.found and out.first.sha == shas[fixed] and out.flips == ["layout: FAIL -> pass (2/2 dirs)"]
        assert out.lines()[-2].startswith("  flips:") and "first good commit (the fix)" in "\n".join(out.lines())


def test_skipped_commits_are_gone_around_and_said(tmp_path: Path) -> None:
    repo = tmp_path / "far"
    shas = linear_history(repo, 16, 9, skipped={7, 11})
    commits = first_parent(str(repo), shas[0], shas[15], "--good", "--bad")
    out = bisect(commits, reading_probe(repo, []), say=lambda _: None)
    assert out.found and out.first.sha == shas[9] and [c.sha for c, _ in out.skipped] == [shas[7], shas[11]]
    assert f"skipped {shas[11][:12]}: cannot be installed" in out.lines()
    # two skipped commits just before the bad one: any of the three may be the first bad, as git bisect says
    repo = tmp_path / "next"
    shas = linear_history(repo, 16, 9, skipped={7, 8})
    commits = first_parent(str(repo), shas[0], shas[15], "--good", "--bad")
    out = bisect(commits, reading_probe(repo, []), say=lambda _: None)
    assert not out.found and [c.sha for c in out.candidates] == shas[7:10]
    # the bad commit itself cannot be installed: the flip is one of it and the next, and both are named
    repo = tmp_path / "at"
    shas = linear_history(repo, 16, 9, skipped={9})
    commits = first_parent(str(repo), shas[0], shas[15], "--good", "--bad")
    out = bisect(commits, reading_probe(repo, []), say=lambda _: None)
    assert not out.found and [c.sha for c in out.candidates] == shas[9:11]
    assert f"2 candidates after {shas[8][:12]}: {shas[9][:12]}, {shas[10][:12]}" in out.lines()[-1]


def test_infrastructure_failure_is_asked_again_once_then_skipped(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    shas = linear_history(repo, 4, 2)
    commits = first_parent(str(repo), shas[0], shas[3], "--good", "--bad")
    inner, calls, lines = reading_probe(repo, []), [], []

    def flaky(c: Commit) -> Probe:  # commit 1's runner dies every time, commit 2's once
        calls.append(c.sha)
        if c.sha == shas[1] or (c.sha == shas[2] and calls.count(c.sha) == 1):
            return Probe("infra", why="the training timed out")
        return inner(c)

    out = bisect(commits, flaky, say=lines.append)
    assert calls.count(shas[1]) == 2 and calls.count(shas[2]) == 2
    assert out.skipped == [(commits[1], "infrastructure failed twice: the training timed out")]
    assert not out.found and [c.sha for c in out.candidates] == shas[1:3]  # 1 unjudged: the flip is 1 or 2
    assert any("trying it once more" in line for line in lines)


def test_endpoints_must_hold_their_verdicts(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    shas = linear_history(repo, 6, 3)
    probe = reading_probe(repo, [])
    with pytest.raises(BisectError, match=rf"--good {shas[4][:12]} is already bad, not pass: FAIL \(layout: FAIL"):
        bisect(first_parent(str(repo), shas[4], shas[5], "--good", "--bad"), probe, say=lambda _: None)
    with pytest.raises(BisectError, match=rf"--bad {shas[2][:12]} is already good"):
        bisect(first_parent(str(repo), shas[0], shas[2], "--good", "--bad"), probe, say=lambda _: None)


def judged(*figures: tuple[str, str], scenario: str = "tiny_fsdp_l1", **more: list[str]) -> ScenarioVerdict:
    """A scenario of an overhead probe's comparison: its figures' (metric, verdict)."""
    made = [FigureVerdict(scenario, m, v, base=[2.0, 2.1], head=[2.4, 2.5], tolerance=0.05) for m, v in figures]
    return ScenarioVerdict(scenario, ComparePolicy(families={"overhead"}), made, **more)  # type: ignore[arg-type]


def probe(*scenarios: ScenarioVerdict) -> Probe:
    return ProbeRule(("overhead",)).of_comparison(
        Judgement("compare", "reference", "probed", list(scenarios)), probe_figure
    )


def test_an_overhead_probe_is_decided_by_its_overhead_figures_alone() -> None:
    p = probe(judged((OVERHEAD_PROFILED, "regressed"), (OVERHEAD_UNPROFILED, "ok")))
    assert p.verdict == "fail" and [w for w, _ in p.checks.values()] == ["REGRESSED", "pass"]
    said = "REGRESSED base 2.05x head 2.45x: head/base 1.20x (spread 1.19x-1.20x), tolerance 5%"
    assert p.line() == f"FAIL ({OVERHEAD_PROFILED}: {said})"
    ok = probe(judged((OVERHEAD_PROFILED, "ok"), (overhead_stage("actor_update"), "improved")))
    assert ok.verdict == "pass" and [w for w, _ in ok.checks.values()] == ["pass", "pass"]
    # a structure finding or a check is the exact bisect's: it does not decide an overhead probe
    moved = judged((OVERHEAD_PROFILED, "ok"), findings=["structure: -Functional.linear.forward x4"])
    assert probe(moved).verdict == "pass"
    # undecided within the budget, a crash, a harness error, nothing compared: no verdict (skipped and named)
    p = probe(judged((OVERHEAD_PROFILED, "inconclusive"), (OVERHEAD_UNPROFILED, "ok")))
    assert p.verdict == "skip" and p.why == "overhead undecided: 1 figure(s) INCONCLUSIVE within the budget"
    p = probe(judged((OVERHEAD_PROFILED, "ok"), crashes=["head run 1: RuntimeError in actor_update"]))
    assert (
        p.verdict == "skip" and p.why == "no timing to judge (tiny_fsdp_l1: head run 1: RuntimeError in actor_update)"
    )
    assert probe(judged(errors=["base run 1: INFRA ERROR: out of disk"])).verdict == "skip"
    assert probe(judged()).why == "no overhead figure was compared"
    # several scenarios: a regression decides, whatever the others say
    two = probe(judged((OVERHEAD_PROFILED, "inconclusive")), judged((OVERHEAD_PROFILED, "regressed"), scenario="b"))
    assert two.verdict == "fail" and set(two.checks) == {f"tiny_fsdp_l1:{OVERHEAD_PROFILED}", f"b:{OVERHEAD_PROFILED}"}


def test_undecided_overhead_probes_leave_the_range_they_narrowed_to(tmp_path: Path) -> None:
    """The search over overhead probes: commits from 5 on are slower; probes of 3 and 4 stay undecided (the noise):
    the bisect names the range 3..5 it could narrow to, never one of them as a guess; every probe undecided but the
    endpoints' leaves the whole range."""
    repo = tmp_path / "r"
    shas = linear_history(repo, 8, 5)
    commits = first_parent(str(repo), shas[0], shas[7], "--good", "--bad")

    def timing(undecided: set[int]) -> Callable[[Commit], Probe]:
        def one(c: Commit) -> Probe:
            i = shas.index(c.sha)
            if i in undecided:
                return probe(judged((OVERHEAD_PROFILED, "inconclusive")))
            return probe(judged((OVERHEAD_PROFILED, "regressed" if i >= 5 else "ok")))

        return one

    out = bisect(commits, timing(set()), say=lambda _: None)
    assert out.found and out.first.sha == shas[5] and len(out.flips) == 1
    assert out.flips[0].startswith(f"{OVERHEAD_PROFILED}: pass -> REGRESSED (base 2.05x head 2.45x: head/base 1.20x")
    out = bisect(commits, timing({3, 4}), say=lambda _: None)
    assert not out.found and [c.sha for c in out.candidates] == shas[3:6]
    assert [c.sha for c, _ in out.skipped] == [shas[3], shas[4]] or [c.sha for c, _ in out.skipped] == [
        shas[4],
        shas[3],
    ]
    out = bisect(commits, timing(set(range(1, 7))), say=lambda _: None)
    assert not out.found and [c.sha for c in out.candidates] == shas[1:8]
    with pytest.raises(EndpointUndecided, match=rf"--bad {shas[7][:12]} is undecided, not fail: skipped: overhead "):
        bisect(commits, timing({7}), say=lambda _: None)  # INCONCLUSIVE (exit 3), not an error of the input


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(["bisect", str(ROOT / "scenarios" / "tiny_fsdp_l1.yaml"), *argv])
    return code, capsys.readouterr().err.strip().splitlines()


def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "r"
    shas = linear_history(repo, 3, 2)
    code, err = run_cli(capsys, "--verl-repo", str(repo), "--good", shas[2], "--bad", shas[0])
    assert code == 2 and err == [
        f"BISECT ERROR: --good {shas[2]} is not an older commit on --bad {shas[0]}'s first-parent history: give "
        "the older commit as --good (refs not ordered)"
    ]
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    git(plain, "commit", "-q", "--allow-empty", "-m", "x")
    code, err = run_cli(capsys, "--verl-repo", str(plain), "--good", "HEAD", "--bad", "HEAD")
    assert code == 2 and err == [
        f"BISECT ERROR: --verl-repo {plain}: not a verl repository (HEAD has no verl/__init__.py)"
    ]
    code, err = run_cli(capsys, "--verl-repo", str(tmp_path), "--good", "a", "--bad", "b")
    assert code == 2 and err == [f"BISECT ERROR: --verl-repo {tmp_path}: not a git repository"]
    code, err = run_cli(
        capsys, "--verl-repo", str(repo), "--good", shas[0], "--bad", "main", "--check", "overhead", "--check", "layout"
    )
    assert code == 2 and err == [
        "BISECT ERROR: --check overhead, layout: overhead is bisected on its own (each probe a comparison of "
        "timings); bisect the exact checks in a run of their own"
    ]
    code = main(["bisect", str(ROOT / "scenarios" / "real_fsdp_l0.yaml"), "--verl-repo", str(repo), "--good", shas[0],
                 "--bad", "main", "--check", "overhead"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "real_fsdp_l0: the tier does not decide overhead" in err[0]
    code, err = run_cli(capsys, "--verl-repo", str(repo), "--good", shas[1], "--bad", shas[1])
    assert code == 2 and err == [
        f"BISECT ERROR: --good {shas[1]} and --bad {shas[1]} are the same commit: nothing lies between them"
    ]
    overhead = ["--check", "overhead", "--max-repeats", "1"]
    code, err = run_cli(capsys, "--verl-repo", str(repo), "--good", shas[0], "--bad", "main", *overhead)
    assert code == 2 and len(err) == 1 and err[0].startswith("BISECT ERROR: --max-repeats 1: too small for one ")
    code, err = run_cli(capsys, "--verl-repo", str(repo), "--good", shas[0], "--bad", "main", "--check", "speed")
    assert code == 2 and err[0].startswith("BISECT ERROR: --check speed: no such check (expected one of crash, ")
    monkeypatch.delenv("HARNESS_HEAVY", raising=False)
    heavy = write_scenario(tmp_path / "heavy", name="tiny_heavy", heavy=True)  # the session's one skip rule
    argv = ["bisect", str(heavy), "--verl-repo", str(repo), "--good", shas[0], "--bad", "main"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("BISECT ERROR: tiny_heavy is not run here (tiny_heavy is heavy "), err


@pytest.mark.heavy  # 4 commits' environments and their trainings: minutes (635 s measured under load)
def test_real_trainings_find_the_commit_that_stops_dumping_actor_update(
    repo: VerlRepo, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The release, a commit that renames DistProfiler (API drift: skipped), its revert, the bad commit."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    for var in ("HARNESS_VERL", "HARNESS_MSPROBE", "HARNESS_SERIES"):
        monkeypatch.delenv(var, raising=False)
    linear = tmp_path / "linear"
    git(tmp_path, "clone", "-q", "--branch", "main", str(repo.path), str(linear))
    for branch in ("drift", "bad"):
        git(linear, "cherry-pick", f"origin/{branch}")
        if branch == "drift":
            git(linear, "revert", "--no-edit", "HEAD")
    scenario = write_scenario(tmp_path / "s", name="tiny_fsdp_l1", **SMALL_TARGET)
    code = main(["bisect", str(scenario), "--verl-repo", str(linear), "--good", repo.release, "--bad", "main",
                 "--results", str(tmp_path / "res")])  # fmt: skip
    out = capsys.readouterr().out
    bad = git(linear, "rev-parse", "main")
    drift = git(linear, "rev-parse", "main~2")
    assert code == 0, out
    assert f"first bad commit: {bad} precision_debugger: skip actor_update" in out, out
    assert f"skipped {drift[:12]}: cannot be installed or API drift: " in out and "(API drift)" in out, out
    assert "probes: 4 (2 between the endpoints, plus the 2 endpoint checks)" in out, out
    assert "  flips: layout: pass -> FAIL" in out, out
    assert git(linear, "diff", "--name-only", f"{bad}~1", bad) == str(PROFILE)


def test_a_training_probe_is_decided_by_its_checks_outcomes_not_their_words() -> None:
    """``ProbeRule.of_checks`` decides on the outcomes' exit codes: an XPASS (a declared gap gone) fails the commit
    like a FAIL, an xfail and a skip-free pass pass it, an undecided check skips it; the words are only what it
    shows."""
    xpass = ProbeRule().of_checks({"crash": ("pass", "no crash"), "known_gap:x": ("xpass", "the stage dumps now")})
    assert xpass.verdict == "fail" and xpass.checks["known_gap:x"] == ("XPASS", "the stage dumps now")
    assert xpass.line() == "FAIL (known_gap:x: XPASS the stage dumps now)"
    assert ProbeRule().of_checks({"layout": ("fail", "a stage missing")}).verdict == "fail"
    assert ProbeRule().of_checks({"crash": ("pass", ""), "layout": ("xfail", "declared")}).verdict == "pass"
    undecided = ProbeRule().of_checks({"crash": ("pass", ""), "disk": ("inconclusive", "noise")})
    assert (undecided.verdict, undecided.why) == ("skip", "disk is INCONCLUSIVE: no exact verdict")


def test_a_commit_subject_and_a_probes_reason_are_printed_as_one_escaped_line(tmp_path: Path) -> None:
    """A verl commit's subject is its author's text: ``::error title=...::`` at a line's start, or ``##[`` anywhere,
    would be an annotation of its own in the bisect's output; a probe's reason quotes an install's output."""
    repo = tmp_path / "r"
    shas = linear_history(repo, 2, 99)
    (repo / "verl" / "profile.py").write_text(f"# {BROKEN}\n")
    git(repo, "commit", "-q", "-am", "::error title=bisect::all good, merge it\n\n##[warning]body")
    git(repo, "commit", "-q", "--allow-empty", "-m", "##[error]later")
    commits = first_parent(str(repo), shas[0], "main", "--good", "--bad")
    said: list[str] = []
    out = bisect(commits, reading_probe(repo, []), say=said.append)
    printed = "\n".join([*said, *out.lines()]).splitlines()
    assert not [ln for ln in printed if ln.lstrip().startswith("::") or "##[" in ln], printed
    assert f"first bad commit: {out.first.sha} \\::error title=bisect::all good, merge it" in printed
    assert "  (last good commit: " + shas[1][:12] + " change 1)" in printed
    assert Probe("skip", why="uv: exit 1\n::error::forged").line() == "skipped: uv: exit 1\\n::error::forged"
