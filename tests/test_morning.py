"""The morning after: a night that is a verdict on verl opens or updates one issue in the calling repository
(.ci/history issue, through the real gh against the fake API: tests/fake_github.py), naming the scenario, the figure,
the commit range and the command that reproduces it, with the page of the nights, which the history job publishes on
the branch (docs/, for GitHub Pages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fake_github import FakeGitHub
from test_history_branch import BRANCH, git, results, seed
from workflow_engine import gh

from harness import job

ROOT = Path(__file__).resolve().parents[1]
PAGES_URL = "https://verl-project.github.io/verl/"
RUN = "https://github.com/verl-project/verl/actions/runs/42"
REPRODUCE = "python -m harness compare scenarios/tiny_case.yaml --base https://github.com/verl-project/verl@aaaa"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeGitHub]:
    """The REST API ``gh api`` calls (tests/fake_github.py), verl's repository on it."""
    fake = FakeGitHub(tmp_path / "api", tmp_path / "artifacts")
    fake.repo("verl-project/verl")
    fake.token("write", issues="write")
    fake.token("read")
    yield fake
    fake.close()


def _env(tmp_path: Path, api: FakeGitHub, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return env | {"PATH": f"{Path(gh()).parent}:{env['PATH']}", "GH_TOKEN": token, "NIGHTLY": "cpu",
                  "HTTPS_PROXY": f"http://127.0.0.1:{api.port}", "SSL_CERT_FILE": str(api.authority), "NO_PROXY": "",
                  "GH_CONFIG_DIR": str(tmp_path / "gh"), "RESULTS": str(tmp_path / "morning"), "PYTHON": sys.executable,
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


def _issue(tmp_path: Path, api: FakeGitHub, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["bash", ".ci/history", "issue", "verl-project/verl", "precision_debugger: a verdict on verl main", *args]
    return subprocess.run(argv, cwd=ROOT, env=_env(tmp_path, api, token), capture_output=True, text=True, check=False,
                          timeout=300)  # fmt: skip


@pytest.mark.integration
def test_a_confirmed_regression_files_one_issue_with_its_range_reproduce_command_and_page(tmp_path, capsys, api):
    """The history job publishes the page of the nights on the branch and links it; the morning's job opens the
    issue (none open) with the night's finding, the history's confirmed regression (its verl commit range and both
    commands), the run and the page; a later night comments on the one open issue; a night that failed for an error
    files nothing."""
    bare = seed(tmp_path, capsys, [(i, 1.4 if i >= 9 else 1.0) for i in range(1, 11)])
    env = _env(tmp_path, api, "write") | {"RESULTS": str(tmp_path / "history"),
                                    "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}  # fmt: skip
    proc = subprocess.run(["bash", ".ci/history", "night", str(bare), BRANCH, f"cpu.json={results(tmp_path, 11, 1.4)}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "<html" in git("show", f"{BRANCH}:docs/cpu/index.html", cwd=bare)  # where GitHub Pages serves it
    assert git("show", f"{BRANCH}:docs/.nojekyll", cwd=bare) == ""
    assert f"The page of the nights: {PAGES_URL}cpu/" in (tmp_path / "summary.md").read_text()

    failed, broken = _night(tmp_path, "nightly-cpu-results-pinned", "fail"), _night(tmp_path, "errored", "error")
    proc = _issue(tmp_path, api, "write", str(failed), str(broken), "--", str(tmp_path / "history" / "cpu-check.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (issue,) = api.repo("verl-project/verl").issues.values()
    assert issue["title"] == "precision_debugger: a verdict on verl main"
    assert {lb["name"] for lb in issue["labels"]} == {"precision-debugger-regression", "precision-debugger-cpu"}
    body = issue["body"]
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
    assert "::notice title=precision_debugger morning::https://github.com/verl-project/verl/issues/1" in proc.stdout

    api.calls.clear()
    proc = _issue(tmp_path, api, "write", str(failed))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert api.calls == [("GET", "/repos/verl-project/verl/issues"),
                         ("POST", "/repos/verl-project/verl/issues/1/comments")]  # fmt: skip
    assert REPRODUCE in issue["comments"][0]

    api.calls.clear()
    proc = _issue(tmp_path, api, "write", str(broken))
    assert proc.returncode == 0 and "a night ended in an error (errored): the issue is left as it is" in proc.stdout
    assert not api.calls


@pytest.mark.integration
def test_a_token_that_may_not_write_issues_is_one_line_never_a_silent_green(tmp_path, api):
    proc = _issue(tmp_path, api, "read", str(_night(tmp_path, "night", "fail")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error")]
    assert line.startswith("::error title=precision_debugger history::the morning's issue could not be filed in "
                           "verl-project/verl: the token may not write issues (gh: Resource not accessible by "
                           "integration (HTTP 403)")  # fmt: skip
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
        assert notify["concurrency"] == {"group": f"precision-debugger-morning-{notify['env']['NIGHTLY']}",
                                         "cancel-in-progress": False}  # fmt: skip
        assert set(notify["needs"]) == {"nightly", "history"}
        assert "github.event_name != 'pull_request'" in notify["if"] and notify["if"].startswith("${{ !cancelled()")
        assert '-- bash .ci/history issue "$REPO" "$TITLE"' in " ".join(s.get("run", "") for s in notify["steps"])
        assert notify["env"]["PAGES"].startswith("${{ inputs.pages-url && format(")
        assert jobs["history"]["env"]["PAGES_URL"] == "${{ inputs.pages-url }}"
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
