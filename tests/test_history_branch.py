""".ci/history, the nightly's last job, against a bare git repository standing in for the history branch: a night
appended, checked and pushed; a confirmed regression fails the night with its annotation and bisect command; a
suspected one warns; an accepted one is shown; a branch another job moved meanwhile is one error and nothing lost;
and the bisect job's plan (the bisect itself, minutes a probe: docs/history.md's measured run)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gate_builders import ENV, write_results
from test_history import NOISE

from harness.cli import main
from harness.history.checkdoc import MAX_BISECT_COMMITS, CheckFinding, CheckRange, HistoryCheckDoc

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "precision-debugger-history"


def git(*argv: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def results(tmp_path: Path, i: int, slow: float = 1.0) -> Path:
    """Night ``i``'s results dir: verl commit ``i``, the profiled step ``slow`` x its level."""
    r = tmp_path / f"night{i}"
    env = ENV | {"verl_commit": f"{i:02x}" * 20, "cpu_model": "Xeon"}
    write_results(r, env=env, dumps=False, profiled=10.0 * slow * (1 + NOISE[i % len(NOISE)]))
    return r


def seed(tmp_path: Path, capsys: pytest.CaptureFixture[str], nights: list[tuple[int, float]]) -> Path:
    """A bare repository whose history branch holds ``cpu.json`` with ``nights`` (number, slowdown) appended."""
    work = tmp_path / "seed"
    git("init", "-q", "-b", BRANCH, str(work))
    for i, slow in nights:
        assert main(["history", "append", str(work / "cpu.json"), str(results(tmp_path, i, slow)),
                     "--date", f"2026-11-{i:02d}", "--runner", "x"]) == 0  # fmt: skip
    capsys.readouterr()
    git("add", "cpu.json", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed", cwd=work)
    bare = tmp_path / "history.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    return bare


def night(tmp_path: Path, bare: Path, *pairs: str, name: str = "job") -> subprocess.CompletedProcess[str]:
    out = tmp_path / name
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env |= {"RESULTS": str(out), "PYTHON": sys.executable, "GITHUB_STEP_SUMMARY": str(out / "summary.md")}
    return subprocess.run(["bash", ".ci/history", "night", str(bare), BRANCH, *pairs], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip


def nights_on_branch(bare: Path) -> int:
    return len(json.loads(git("show", f"{BRANCH}:cpu.json", cwd=bare))["nights"])


def annotations(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith("::")]


@pytest.mark.integration
def test_the_first_night_starts_the_branch_and_the_second_is_checked(tmp_path, capsys):
    bare = tmp_path / "history.git"
    git("init", "-q", "--bare", str(bare))
    first = night(tmp_path, bare, f"cpu.json={results(tmp_path, 1)}", name="one")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"::notice title=precision_debugger history::no branch {BRANCH} in {bare}: this night starts it" in (
        annotations(first)
    )
    assert "STARTED: each of the" in first.stdout and nights_on_branch(bare) == 1
    second = night(tmp_path, bare, f"cpu.json={results(tmp_path, 2)}", name="two")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "no change point in 4 series" in second.stdout and nights_on_branch(bare) == 2
    assert (tmp_path / "two" / "site" / "cpu" / "tiny_case.html").is_file()  # the page of the nights
    summary = (tmp_path / "two" / "summary.md").read_text()
    assert summary.startswith(f"## precision_debugger: the history of nights (branch {BRANCH})") and "✅" in summary


@pytest.mark.integration
def test_a_confirmed_regression_fails_the_night_names_its_range_and_bisect_and_is_recorded(tmp_path, capsys):
    bare = seed(tmp_path, capsys, [(i, 1.4 if i >= 9 else 1.0) for i in range(1, 11)])
    proc = night(tmp_path, bare, f"cpu.json={results(tmp_path, 11, 1.4)}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [a for a in annotations(proc) if a.startswith("::error")]
    assert errors[0].startswith("::error title=precision_debugger gate::FAIL (exit 1: a regression of head")
    # the profiled step's series and the first profiled step's (msprobe's set-up, a figure of its own) both stepped
    (regressed,) = [a for a in errors if "REGRESSED tiny_case overhead.wall.profiled " in a.replace(":", "")]
    good, bad = "08" * 6, "09" * 6
    assert f"verl commits {good}..{bad}" in regressed
    assert f"python -m harness bisect scenarios/tiny_case.yaml --verl-repo VERL --good {good} --bad {bad} " in (
        regressed
    )
    assert nights_on_branch(bare) == 11  # the failing night is recorded: the next one is judged with it
    # no verl clone (VERL_REPO) gave the nights' first-parent positions: the range's size is unknown, not bisected
    assert (tmp_path / "job" / "bisects.txt").read_text() == ""
    doc = HistoryCheckDoc.read_file(tmp_path / "job" / "cpu-check.json", 1 << 20)
    assert (doc.exit_code, doc.nightly_exit) == (1, 1)
    assert "❌ **FAIL**" in (tmp_path / "job" / "summary.md").read_text()


@pytest.mark.integration
def test_a_suspected_regression_warns_and_an_accepted_one_is_shown(tmp_path, capsys):
    bare = seed(tmp_path, capsys, [(i, 1.4 if i == 9 else 1.0) for i in range(1, 10)])
    proc = night(tmp_path, bare, f"cpu.json={results(tmp_path, 10, 1.4)}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(a.startswith("::warning title=SUSPECTED") for a in annotations(proc)), annotations(proc)
    assert "PASS with a warning: INCONCLUSIVE" in proc.stdout
    # accepted on the branch (a maintainer's history accept, pushed), the next night shows it
    work = tmp_path / "accept"
    git("clone", "-q", "-b", BRANCH, str(bare), str(work))
    changes = [re.search(r" \[(\S+@\S+)\]", a)[1] for a in annotations(proc) if "SUSPECTED" in a]
    assert len(changes) == 2  # the profiled step and its first step (msprobe's set-up), a figure of its own
    for change in changes:
        assert main(["history", "accept", str(work / "cpu.json"), change, "--reason", "richer statistics"]) == 0
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "accept", cwd=work)
    git("push", "-q", "origin", BRANCH, cwd=work)
    after = night(tmp_path, bare, f"cpu.json={results(tmp_path, 11, 1.4)}", name="after")
    assert after.returncode == 0, after.stdout + after.stderr
    assert any(a.startswith("::notice title=accepted tiny_case::") and "richer statistics" in a
               for a in annotations(after))  # fmt: skip


@pytest.mark.integration
def test_a_branch_moved_meanwhile_is_one_error_and_the_other_jobs_night_is_kept(tmp_path, capsys):
    """Another job pushes between this job's fetch and its push (a hook in the bare repository moves the branch
    when this push arrives): the push is refused, said in one line, exit 2; the other job's commit stays."""
    bare = seed(tmp_path, capsys, [(1, 1.0)])
    other = git("commit-tree", f"{BRANCH}^{{tree}}", "-p", BRANCH, "-m", "another job's night", cwd=bare)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\nunset GIT_QUARANTINE_PATH\ngit update-ref refs/heads/{BRANCH} {other}\n")
    hook.chmod(0o755)
    proc = night(tmp_path, bare, f"cpu.json={results(tmp_path, 2)}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (moved,) = [a for a in annotations(proc) if "moved since this job read it" in a]
    assert moved.startswith(f"::error title=precision_debugger history::the history branch {BRANCH} moved")
    assert "this night is not recorded; rerun this job" in moved
    assert git("rev-parse", BRANCH, cwd=bare) == other and nights_on_branch(bare) == 1


@pytest.mark.integration
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bare = seed(tmp_path, capsys, [(1, 1.0)])
    before = git("rev-parse", BRANCH, cwd=bare)
    missing = night(tmp_path, bare, f"cpu.json={tmp_path / 'absent'}", name="missing")
    assert missing.returncode == 2
    (line,) = [a for a in annotations(missing) if a.startswith("::error")]
    assert "(night " in line and "not appended to cpu.json)" in line
    unreachable = night(tmp_path, tmp_path / "no-such.git", f"cpu.json={results(tmp_path, 2)}", name="unreachable")
    assert unreachable.returncode == 2
    assert "cannot read " in unreachable.stdout and "not a verdict on verl" in unreachable.stdout
    bad_pair = night(tmp_path, bare, "../cpu.json=x", name="pair")
    assert bad_pair.returncode == 2 and "not FILE=RESULTS_DIR" in bad_pair.stdout
    assert git("rev-parse", BRANCH, cwd=bare) == before


def finding(scenario: str, status: str, commits: int | None) -> CheckFinding:
    return CheckFinding.model_validate({
        "status": status, "accepted": False, "scenario": scenario, "metric": "overhead.wall.profiled",
        "change": f"{scenario}:m@n", "line": "", "range": CheckRange(good="a" * 40, bad="b" * 40, commits=commits),
    })  # fmt: skip


def test_the_nightly_bisects_confirmed_tiny_regressions_within_16_commits_once_each():
    doc = HistoryCheckDoc(exit_code=1, verdict="FAIL", nightly_exit=1, nightly_verdict="FAIL", nights=12, lines=[],
                          findings=[finding("tiny_fsdp_l1", "regressed", 5), finding("tiny_fsdp_l1", "regressed", 5),
                                    finding("tiny_megatron_l1", "regressed", MAX_BISECT_COMMITS + 1),
                                    finding("tiny_fsdp_l0", "regressed", 1), finding("tiny_fsdp_l0", "suspected", 4),
                                    finding("real_fsdp_l0", "regressed", 4), finding("tiny_cuda_l0", "regressed", None),
                                    finding("tiny_megatron_l0", "regressed", MAX_BISECT_COMMITS)])  # fmt: skip
    assert [(scenario, r.commits) for scenario, r in doc.bisects()] == [
        ("tiny_fsdp_l1", 5),
        ("tiny_megatron_l0", MAX_BISECT_COMMITS),
    ]


@pytest.mark.integration
def test_the_bisect_job_with_nothing_to_bisect_says_so(tmp_path):
    check = tmp_path / "cpu-check.json"
    HistoryCheckDoc(exit_code=0, verdict="PASS", nightly_exit=0, nightly_verdict="PASS", nights=3, lines=[],
                    findings=[]).write(check)  # fmt: skip
    env = os.environ | {"RESULTS": str(tmp_path / "b"), "PYTHON": sys.executable, "GITHUB_STEP_SUMMARY": "/dev/null"}
    proc = subprocess.run(["bash", ".ci/history", "bisect", str(tmp_path), str(check)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert (proc.returncode, proc.stdout.strip()) == (0, "history: no regression to bisect")
    check.write_text("{}")
    proc = subprocess.run(["bash", ".ci/history", "bisect", str(tmp_path), str(check)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 2 and "::error title=precision_debugger history::no bisect plan: HISTORY ERROR: " in (
        proc.stdout
    )


@pytest.mark.integration
@pytest.mark.parametrize("where", ["docs", "docs/.nojekyll", "docs/cpu"])
def test_a_link_on_the_branch_is_refused_nothing_written_through_it_nor_pushed(tmp_path, capsys, where):
    """A link on the branch (another writer's, to an absolute path) would have the night publish through it (docs/
    and its .nojekyll: files made, a directory emptied outside the clone) and push: refused in one error before the
    checkout, the branch where it was and nothing outside changed or made."""
    bare = seed(tmp_path, capsys, [(1, 1.0), (2, 1.0)])
    outside = tmp_path / "outside"
    (outside / "cpu").mkdir(parents=True)
    (outside / "cpu" / "keep.txt").write_text("keep me")
    work = tmp_path / "linked"
    git("clone", "-q", "-b", BRANCH, str(bare), str(work))
    (work / where).parent.mkdir(parents=True, exist_ok=True)
    (work / where).symlink_to(outside / ("cpu" if where == "docs/cpu" else "nojekyll" if "." in where else ""))
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a link", cwd=work)
    git("push", "-q", "origin", BRANCH, cwd=work)
    tip = git("rev-parse", BRANCH, cwd=bare)
    proc = night(tmp_path, bare, f"cpu.json={results(tmp_path, 3)}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert annotations(proc) == [f"::error title=precision_debugger history::the history branch {BRANCH} holds a "
                                 f"symbolic link ({where}): nothing is written through a link; remove it from the "
                                 "branch (this night is not recorded)"]  # fmt: skip
    assert git("rev-parse", BRANCH, cwd=bare) == tip
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == ["cpu", "cpu/keep.txt"]
