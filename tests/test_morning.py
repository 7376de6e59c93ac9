"""The morning after: a night that is a verdict on verl opens or updates one issue in the calling repository
(.ci/history issue, through gh), naming the scenario, the figure, the commit range and the command that reproduces
it, with the page of the nights, which the history job publishes on the branch (docs/, for GitHub Pages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_history_branch import BRANCH, git, results, seed

from harness import job

ROOT = Path(__file__).resolve().parents[1]
PAGES_URL = "https://verl-project.github.io/verl/"
RUN = "https://github.com/verl-project/verl/actions/runs/42"
REPRODUCE = "python -m harness compare scenarios/tiny_case.yaml --base https://github.com/verl-project/verl@aaaa"
FAKE_GH = """#!/usr/bin/env bash
echo "$*" >> "$GH_LOG"
case "$FAKE_GH:$1 $2" in
  denied:*) echo "HTTP 403: Resource not accessible by integration (https://api.github.com/repos/o/r)" >&2; exit 1 ;;
  open:"issue list") echo 7 ;;
  none:"issue list") ;;
  *:"issue create") cp "${@: -1}" "$GH_BODY"; echo "https://github.com/verl-project/verl/issues/8" ;;
  *:"issue comment") cp "${@: -1}" "$GH_BODY" ;;
esac
"""


def _env(tmp_path: Path, mode: str) -> dict[str, str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "gh").write_text(FAKE_GH)
    (fake / "gh").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return env | {"PATH": f"{fake}:{env['PATH']}", "FAKE_GH": mode, "GH_LOG": str(tmp_path / "gh.log"),
                  "GH_BODY": str(tmp_path / "body.md"), "RESULTS": str(tmp_path / "morning"), "PYTHON": sys.executable,
                  "RUN_URL": RUN, "PAGES": f"{PAGES_URL}cpu/", "PAGES_URL": PAGES_URL}  # fmt: skip


def _night(tmp_path: Path, name: str, action: str) -> Path:
    night = tmp_path / name
    night.mkdir()
    (night / "outcome.json").write_text(json.dumps({"title": "t", "code": 1, "action": action, "line": "FAIL"}))
    finding = f"REGRESSED tiny_case: disk.total_bytes baseline 1.00 MB now 2.00 MB (+100%); reproduce: {REPRODUCE}"
    (night / "annotations.txt").write_text(
        "::error title=precision_debugger gate::FAIL (exit 1%3A a regression of head)\n"
        f"::error title=REGRESSED tiny_case::{job.escape(finding)}\n"
        "::error title=ERROR other (not a verdict on verl)::head: training failed\n"
    )
    return night


def _issue(tmp_path: Path, mode: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["bash", ".ci/history", "issue", "verl-project/verl", "precision_debugger: a verdict on verl main", *args]
    return subprocess.run(argv, cwd=ROOT, env=_env(tmp_path, mode), capture_output=True, text=True, check=False,
                          timeout=300)  # fmt: skip


@pytest.mark.integration
def test_a_confirmed_regression_files_one_issue_with_its_range_reproduce_command_and_page(tmp_path, capsys):
    """The history job publishes the page of the nights on the branch and links it; the morning's job opens the
    issue (none open) with the night's finding, the history's confirmed regression (its verl commit range and both
    commands), the run and the page; a later night comments on the one open issue; a night that failed for an error
    files nothing."""
    bare = seed(tmp_path, capsys, [(i, 1.4 if i >= 9 else 1.0) for i in range(1, 11)])
    env = _env(tmp_path, "none") | {"RESULTS": str(tmp_path / "history"),
                                    "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}  # fmt: skip
    proc = subprocess.run(["bash", ".ci/history", "night", str(bare), BRANCH, f"cpu.json={results(tmp_path, 11, 1.4)}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "<html" in git("show", f"{BRANCH}:docs/cpu/index.html", cwd=bare)  # where GitHub Pages serves it
    assert git("show", f"{BRANCH}:docs/.nojekyll", cwd=bare) == ""
    assert f"The page of the nights: {PAGES_URL}cpu/" in (tmp_path / "summary.md").read_text()

    failed, broken = _night(tmp_path, "nightly-cpu-results-pinned", "fail"), _night(tmp_path, "errored", "error")
    proc = _issue(tmp_path, "none", str(failed), str(broken), "--", str(tmp_path / "history" / "cpu-check.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "gh.log").read_text().splitlines()
    assert calls[0].startswith("issue list --repo verl-project/verl --label precision-debugger-regression --state open")
    assert calls[-1].startswith("issue create --repo verl-project/verl --title precision_debugger: a verdict on verl "
                                "main --label precision-debugger-regression --body-file ")  # fmt: skip
    body = (tmp_path / "body.md").read_text()
    assert f"The night's run: {RUN}" in body and f"The page of the nights: {PAGES_URL}cpu/" in body
    assert (
        f"- REGRESSED tiny_case: disk.total_bytes baseline 1.00 MB now 2.00 MB (+100%); reproduce: {REPRODUCE}" in body
    )
    assert "errored" not in body and "training failed" not in body and "FAIL (exit 1" not in body
    (history,) = [ln for ln in body.splitlines() if ln.startswith("- REGRESSED: tiny_case overhead.wall.profiled ")]
    good, bad = "08" * 6, "09" * 6
    assert f"verl commits {good}..{bad}" in history and f"--good {good} --bad {bad}" in history
    public = "https://github.com/verl-project/verl"
    command = f"python -m harness compare scenarios/tiny_case.yaml --base {public}@{good} --head {public}@{bad}"
    assert history.endswith(f"reproduce: {command}")
    assert "::notice title=precision_debugger morning::https://github.com/verl-project/verl/issues/8" in proc.stdout

    (tmp_path / "gh.log").unlink()
    proc = _issue(tmp_path, "open", str(failed))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c.split(" --")[0] for c in (tmp_path / "gh.log").read_text().splitlines()] == [
        "issue list", "issue comment 7", "issue edit 7"]  # fmt: skip

    (tmp_path / "gh.log").unlink()
    proc = _issue(tmp_path, "none", str(broken))
    assert proc.returncode == 0 and "no verdict on verl tonight: nothing to file" in proc.stdout
    assert not (tmp_path / "gh.log").exists()


@pytest.mark.integration
def test_a_token_that_may_not_write_issues_is_one_line_never_a_silent_green(tmp_path):
    proc = _issue(tmp_path, "denied", str(_night(tmp_path, "night", "fail")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error")]
    assert line.startswith("::error title=precision_debugger history::the morning's issue could not be filed in "
                           "verl-project/verl: the token may not write issues (HTTP 403: Resource not accessible by "
                           "integration")  # fmt: skip
    assert line.endswith("grant the calling job issues: write (docs/verl-nightly-caller-example.yml) and keep issues "
                         "enabled in verl-project/verl")  # fmt: skip


def test_one_small_job_files_the_issue_never_for_a_pull_request():
    for name in ("nightly-cpu.yml", "nightly-ascend.yml"):
        jobs = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())["jobs"]
        for job_name, j in jobs.items():
            writes = j.get("permissions", {}).get("issues") == "write"
            assert writes == (job_name == "notify"), (name, job_name)
        notify = jobs["notify"]
        assert notify["permissions"] == {"issues": "write", "actions": "read"}
        assert set(notify["needs"]) == {"nightly", "history"}
        assert "github.event_name != 'pull_request'" in notify["if"] and notify["if"].startswith("${{ !cancelled()")
        assert '-- bash .ci/history issue "$REPO" "$TITLE"' in " ".join(s.get("run", "") for s in notify["steps"])
        assert notify["env"]["PAGES"].startswith("https://${{ github.repository_owner }}.github.io/")
        assert jobs["history"]["env"]["PAGES_URL"].startswith("https://${{ github.repository_owner }}.github.io/")
    caller = yaml.safe_load((ROOT / "docs" / "verl-nightly-caller-example.yml").read_text())
    for job_name in ("nightly", "cpu-nightly"):
        assert caller["jobs"][job_name]["permissions"]["issues"] == "write"


def test_the_issue_body_is_never_written_over_nor_in_place_of_an_input(tmp_path, capsys):
    """--out inside a night read (its annotations, on a night that files nothing: the body's old file removed) or a
    history check read: one line, the input untouched."""
    from harness.cli import main

    night = _night(tmp_path, "passed", "pass")
    check = tmp_path / "cpu-check.json"
    check.write_text("{}")
    for out in (night / "annotations.txt", check):
        before = out.read_bytes()
        code = main(["issue", "--night", str(night), "--history", str(check), "--title", "t", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and len(err.splitlines()) == 1 and f"--out {out}: is " in err, err
        assert out.read_bytes() == before
