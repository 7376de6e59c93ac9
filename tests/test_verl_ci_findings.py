"""What a verl maintainer found reading the workflows before switching them on (issue: nothing in them turns verl red
without a verdict or harms verl's own CI), each held at its root: the job command, the .ci scripts and the workflow
files. The engine's runs of the same paths are tests/test_workflow_engine.py."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fake_github import FakeGitHub

from harness import job, outcomes
from harness.training.executors import local

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
ASCEND = {"nightly-ascend.yml": "nightly", "verl-compare.yml": "compare", "verl-multinode.yml": "multinode"}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _jobs() -> list[tuple[str, str, dict, dict]]:
    out = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        doc = _load(path)
        out += [(path.name, name, j, doc.get("env", {})) for name, j in doc["jobs"].items() if "steps" in j]
    return out


def test_every_job_that_runs_the_harness_once_records_its_timing_rather_than_gating_it():
    """The Ascend nightly, the multi-node job and the CUDA nightly ran ``harness run`` with the timing gated (the
    default): one off/on pair's noise over a maximum was exit 1, a red night blamed on verl and its baseline held
    back. Each such job sets HARNESS_TIMING=record (the CPU nightly's script sets it itself)."""
    single = re.compile(r"-m harness run |\.ci/ascend-job nightly ")
    found = []
    for name, job_name, j, top in _jobs():
        if any(single.search(s.get("run", "")) for s in j["steps"]):
            found.append(name)
            assert (j.get("env", {}) | top).get("HARNESS_TIMING") == "record", f"{name}:{job_name}"
    assert {"nightly-ascend.yml", "verl-multinode.yml", "nightly-cuda.yml"} <= set(found)


@pytest.mark.integration
def test_a_package_index_outage_in_the_set_up_is_an_infrastructure_error_not_a_verdict(tmp_path):
    """``.ci/setup --locked`` under ``set -e`` in ``.ci/cpu-gate``: pip's exit 1 (the index unreachable) ended the job
    ``FAIL (exit 1): a regression of head: a verdict on the verl``. Now one line naming the set-up and pip's error,
    exit 2 (retried once, then red as no verdict), the step summary said."""
    for part in (".ci", "harness"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(os.path.realpath(sys.executable))
    (venv / "pip").write_text(
        "#!/bin/sh\n[ \"$1\" = freeze ] && exit 0\necho 'WARNING: Retrying after connection broken' >&2\n"
        "echo 'ERROR: Could not find a version that satisfies the requirement accelerate==1.15.0 (from versions: "
        "none)' >&2\nexit 1\n"
    )  # fmt: skip
    (venv / "pip").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")} | {
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "RESULTS": str(tmp_path / "results")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "harness.job", "run", "--title", "gate", "--", "bash", ".ci/cpu-gate", "pr", "v@a",
         "v@b"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("::")]
    assert proc.returncode == 1 and lines[-1].startswith("::error title=gate::ERROR (2 attempts), not a verdict on "
                                                         "the pull request"), proc.stdout + proc.stderr  # fmt: skip
    assert lines[0].startswith("::error title=precision_debugger set-up::INFRASTRUCTURE ERROR: the set-up of the "
                               "harness (.ci/setup --locked) failed: ERROR: Could not find a version that satisfies "
                               "the requirement accelerate==1.15.0")  # fmt: skip
    assert "a verdict on the verl" not in proc.stdout and "❌ **ERROR**: INFRASTRUCTURE ERROR" in (
        tmp_path / "summary.md").read_text()  # fmt: skip


def test_an_accepted_night_is_green_publishes_its_baseline_and_files_no_issue(tmp_path, monkeypatch, capsys):
    """A dispatch with accept-baseline on a night that is a verdict on verl: the job ended red and the morning's
    issue was filed anyway. Now the job passes as ACCEPTED (its findings still annotated), publishes its baseline,
    and the record the morning reads files nothing."""
    from harness.report.issue import morning

    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    night = tmp_path / "night"
    night.mkdir()
    assert job.run(["night"], job.Step("nightly", accepted=True, record=night / "outcome.json"),
                   once=lambda argv, env: (1, "")) == 0  # fmt: skip
    assert "baseline=publish" in (tmp_path / "out").read_text()
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("::notice title=nightly::ACCEPTED (exit 1 accepted: accept-baseline)")
    found = morning([night], [])
    assert not found and found.state == "green"
    assert job.run(["night"], job.Step("nightly", record=night / "outcome.json"),
                   once=lambda argv, env: (1, "")) == 1  # fmt: skip
    assert morning([night], []).state == "verdict"


def test_a_step_with_side_effects_is_never_run_twice():
    """``.ci/history night`` pushes and then exited 2: its retry failed with "already in the history", hiding the
    first attempt's error; a retried issue step commented twice. Such steps run once, and the line says why."""
    calls = []

    def once(argv, env):
        calls.append(argv)
        return 2, "the history branch moved"

    assert job.run(["push"], job.Step("history", 20, side_effects=True), once=once) == 1
    assert len(calls) == 1
    line = outcomes.job_outcome(2, why="x (" + outcomes.ONCE + ")").line
    assert "not run again: this step has side effects" in line
    for name in ("nightly-cpu.yml", "nightly-ascend.yml"):
        for j in _load(WORKFLOWS / name)["jobs"].values():
            for step in j.get("steps", []):
                run = step.get("run", "")
                if re.search(r"\.ci/history (night|issue)", run):
                    assert "--side-effects" in run, (name, step["name"])


def test_exit_137_reads_as_out_of_memory():
    line = outcomes.job_outcome(137).line
    assert "out of memory" in line and "cancelled" not in line
    assert "stopped by signal 15 (the job cancelled" in outcomes.job_outcome(143).line
    # git's fatal error exits 128: no signal (the engine's history step read "stopped by signal 0 (the job cancelled")
    assert "signal" not in outcomes.job_outcome(128).line and outcomes.retries(128, 1, 1, None)


def test_the_ascend_jobs_end_by_a_deadline_counted_from_the_jobs_start(monkeypatch):
    """The Ascend jobs' 40 minutes held the set-up and a 35-minute step, HARNESS_DEADLINE counted from the step: the
    image's pull before it and the uploads after it were unbudgeted, and GitHub could cancel the job before the
    harness said anything. Now each job's first step sets JOB_ENDS_BY (its start, plus its minutes less the pull and
    the uploads), the main step ends by it, and the trainings are capped by it."""
    seen = {}

    def once(argv, env):
        seen.update(env)
        return 0, ""

    now = time.time()
    job.run(["x"], job.Step("t", 30, ends_by=now + 600), once=once)
    assert abs(float(seen[job.DEADLINE_ENV]) - (now + 600)) < 5  # the job's end, not the step's 30 minutes
    for name, job_name in ASCEND.items():
        j = _load(WORKFLOWS / name)["jobs"][job_name]
        first = j["steps"][0]["run"]
        assert "JOB_ENDS_BY=$(( $(date +%s) + (JOB_MINUTES - JOB_PULL_MIN - JOB_UPLOAD_MIN) * 60 ))" in first, name
        assert int(j["env"]["JOB_MINUTES"]) == j["timeout-minutes"]
        (main,) = [s for s in j["steps"] if "--ends-by \"$JOB_ENDS_BY\"" in s.get("run", "")]
        minutes = int(re.search(r"--minutes (\d+)", main["run"])[1])  # type: ignore[index]
        setup = 5
        assert int(j["env"]["JOB_PULL_MIN"]) + setup + minutes + int(j["env"]["JOB_UPLOAD_MIN"]) <= j["timeout-minutes"]


def test_the_local_executor_records_the_image_it_runs_inside_with_what_it_holds(monkeypatch):
    """verl rebuilds its Ascend ``:latest`` daily and the job-container jobs train in it with the local executor, which
    recorded no image: a new torch_npu in the image landed in the series as verl's change. Now the run records the
    image the workflow names and a fingerprint of its installed packages, which moves when they do."""
    from harness import config

    class Dist:
        def __init__(self, name: str, version: str) -> None:
            self.metadata, self.version = {"Name": name}, version

    image = "swr.example/verl:latest-vllm-910b-ubuntu"
    monkeypatch.setenv(config.JOB_IMAGE.name, image)
    held = [Dist("torch", "2.7.1"), Dist("torch_npu", "2.7.1"), Dist("verl", "0.9.1")]
    monkeypatch.setattr(local.importlib.metadata, "distributions", lambda: held)
    before = local.LocalExecutor().environment(None, None)["image"]  # type: ignore[arg-type]
    held[1] = Dist("torch_npu", "2.7.1.post2")
    after = local.LocalExecutor().environment(None, None)["image"]  # type: ignore[arg-type]
    held[2] = Dist("verl", "0.9.2")  # the verl under test is the job's, never the image's
    assert before.startswith(image + " (content ") and before != after
    assert local.LocalExecutor().environment(None, None)["image"] == after  # type: ignore[arg-type]
    for name, job_name in (("nightly-ascend.yml", "nightly"), ("verl-compare.yml", "compare")):
        env = _load(WORKFLOWS / name)["jobs"][job_name]["env"]
        assert env["HARNESS_IMAGE"] == "${{ inputs.mode == 'job-container' && inputs.image || '' }}"


def test_the_pages_of_the_nights_are_not_verls_site_and_not_hard_coded():
    """A repository has one Pages site, and verl's doc.yml publishes it: PAGES_URL was github.io of the calling
    repository, hard-coded. Now an input, empty by default (the page stays on the branch and in the artifact)."""
    for path in [*WORKFLOWS.glob("*.yml"), *(ROOT / "docs").glob("*.yml")]:
        assert "github.io" not in path.read_text(), path.name
    for name in ("nightly-cpu.yml", "nightly-ascend.yml"):
        doc = _load(WORKFLOWS / name)
        assert doc[True]["workflow_call"]["inputs"]["pages-url"]["default"] == ""
        assert doc["jobs"]["history"]["env"]["PAGES_URL"] == "${{ inputs.pages-url }}"


def test_the_newest_axis_never_saves_the_cache_the_pull_requests_restore():
    """The newest leg installs an msprobe from outside the lock; it could save ~/.cache/pip under the key the pull
    request gate restores. Only the pinned leg saves."""
    steps = _load(WORKFLOWS / "nightly-cpu.yml")["jobs"]["nightly"]["steps"]
    (save,) = [s for s in steps if s.get("uses", "").startswith("actions/cache/save@")]
    assert "matrix.msprobe == 'pinned'" in save["if"]


def _setup_mode(mode: str) -> str:
    """The text of ``.ci/setup``'s ``mode)`` arm (to its ``;;``) and what every mode runs before the arms."""
    text = (ROOT / ".ci" / "setup").read_text()
    arms = text.split('case "${1:-}" in', 1)
    return arms[0] + arms[1].split(f"  {mode})", 1)[1].split(";;", 1)[0]


def test_what_the_pip_cache_holds_never_changes_what_the_gate_installs():
    """The root of the finding: the gate installed the lock from the restored ~/.cache/pip without hashes, so a wheel
    any job saved there under its key (the newest leg's, a tampered one) was installed as it was; it upgraded pip and
    built the harness from that cache too. Now every requirement of .ci/cpu.lock carries its sha256 and every job
    that restores the cache sets up with `.ci/setup --locked`: pip's --require-hashes and --no-deps over the lock, the
    venv's own pip, the harness a path on the venv (nothing built), otava's wheel hashed."""
    text = (ROOT / ".ci" / "cpu.lock").read_text()
    requirements = [r for r in re.split(r"\n(?=\S)", text) if not r.startswith(("#", "-"))]
    assert len(requirements) > 100
    for r in requirements:
        assert re.fullmatch(r"[A-Za-z0-9][\w.-]*==\S+( \\\n    --hash=sha256:[0-9a-f]{64})+\n?", r), r[:200]
    locked = _setup_mode("--locked")
    assert '--require-hashes --no-deps -r "$LOCK"' in locked
    installs = [i for i in re.findall(r"pip install[^\n]*", locked) if i != "pip install -q --upgrade pip; fi"]
    assert all("--require-hashes --no-deps" in i for i in installs), installs  # the lock's, otava's
    assert '[ "${1:-}" != --locked ]' in locked and "-e ." not in locked
    assert "bash .ci/setup --locked" in (ROOT / ".ci" / "cpu-gate").read_text()
    for name in ("verl-cpu-gate.yml", "nightly-cpu.yml"):
        for job_name, spec in _load(WORKFLOWS / name)["jobs"].items():
            steps = spec.get("steps", [])
            if not any("cpu-gate-pip-" in str(s.get("with", {}).get("key", "")) for s in steps):
                continue
            runs = " ".join(s.get("run", "") for s in steps)
            assert re.search(r"\.ci/setup --(locked|history)|\.ci/cpu-gate ", runs), (name, job_name)
            assert "pip install" not in runs, (name, job_name)


def test_the_harness_is_pinned_by_commit_in_every_reusable_workflow():
    """``harness-ref`` defaulted to ``main``, a moving target: now required, and each job that checks the harness
    out refuses a ref that is not a commit sha in one line, exit 2, before anything runs."""
    checked = 0
    for name, job_name, j, _ in _jobs():
        doc = _load(WORKFLOWS / name)
        inputs = doc[True].get("workflow_call", {}).get("inputs", {})
        if "harness-ref" in inputs:
            assert inputs["harness-ref"].get("required") is True and "default" not in inputs["harness-ref"], name
        names = [s.get("name") for s in j["steps"]]
        if "Check out the harness" in names:
            pin = j["steps"][names.index("Check out the harness") - 1]
            assert pin["name"] == "The harness is pinned by commit", (name, job_name)
            for ref, code in (("main", 2), ("a" * 40, 0)):
                proc = subprocess.run(["bash", "-c", pin["run"]], env={"HARNESS_REF": ref, "PATH": os.environ["PATH"]},
                                      capture_output=True, text=True, check=False)  # fmt: skip
                assert proc.returncode == code, (name, proc.stdout)
                if code:
                    assert proc.stdout.startswith("::error title=precision_debugger set-up::harness-ref main is not")
            checked += 1
    assert checked >= 10


@pytest.mark.integration
def test_the_history_token_never_reaches_a_command_line(tmp_path):
    """``.ci/history`` passed the token to git as ``-c http.extraheader=...``: on the command line, readable by every
    process of the runner. Now through git's environment: no git process is given it in its argv."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    spy = tmp_path / "bin"
    spy.mkdir()
    real = shutil.which("git")
    (spy / "git").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {tmp_path}/argv.log\nexec {real} \"$@\"\n")
    (spy / "git").chmod(0o755)
    token = "ghs_" + "s3cret" * 6
    env = os.environ | {"PATH": f"{spy}:{os.environ['PATH']}", "HISTORY_TOKEN": token,
                        "RESULTS": str(tmp_path / "results")}  # fmt: skip
    subprocess.run(["bash", ".ci/history", "fetch", str(remote), "precision-debugger-history", "cpu.json",
                    str(tmp_path / "out.json")], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    argv = (tmp_path / "argv.log").read_text()
    secret = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert "ls-remote" in argv and token not in argv and secret not in argv


def test_the_caller_examples_are_what_the_command_prints_for_a_commit_of_this_repository():
    """The examples held ``OWNER`` and a placeholder sha: a maintainer could not paste them. Each is what ``python -m
    harness caller KIND --ref SHA`` prints for the commit it pins, and that commit is one of this repository's."""
    from harness.cli.caller import CALLERS, caller

    for kind, name in CALLERS.items():
        text = (ROOT / "docs" / name).read_text()
        assert "OWNER/verl-msprobe-harness" not in text and "0123456789abcdef" not in text, name
        (pinned,) = set(re.findall(r"\.yml@([0-9a-f]{40})", text))
        (repository,) = set(re.findall(r"uses: ([\w.-]+/[\w.-]+)/\.github/workflows/", text))
        assert caller(kind, pinned, repository) == text, name
        proc = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{pinned}^{{commit}}"], check=False)
        assert proc.returncode == 0, f"{name} pins {pinned}, not a commit of this repository"


# -- the morning's issue: one per nightly, found, opened, commented, closed -----------------------------------------
def _night(where: Path, action: str, finding: str = "") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "outcome.json").write_text(json.dumps({"title": "n", "code": 0, "action": action, "line": action}))
    (where / "annotations.txt").write_text(job.command("error", "REGRESSED tiny_fsdp_l1", finding) + "\n" if
                                           finding else "")  # fmt: skip
    return where


def _issue(api: FakeGitHub, tmp: Path, token: str, nightly: str, night: Path) -> subprocess.CompletedProcess:
    from workflow_engine import gh

    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")} | {
        "GH_TOKEN": token, "HTTPS_PROXY": f"http://127.0.0.1:{api.port}", "SSL_CERT_FILE": str(api.authority),
        "NO_PROXY": "", "GH_CONFIG_DIR": str(tmp / "gh"), "PATH": f"{Path(gh()).parent}:{os.environ['PATH']}",
        "NIGHTLY": nightly, "RESULTS": str(tmp / f"results-{nightly}"), "RUN_URL": "https://ci/run/1",
        "PYTHON": sys.executable}  # fmt: skip
    return subprocess.run(["bash", ".ci/history", "issue", "verl-project/verl", f"a verdict ({nightly})", str(night)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.integration
def test_each_nightly_keeps_one_issue_opened_commented_and_closed_by_its_nights(tmp_path):
    """Both nightlies found "their" issue by one label and nothing closed it: each could open its own or comment on the
    other's. Now each nightly's issue carries its own label: a red night opens it, the next comments, a green night
    closes it; a night that ended in an error leaves it; the other nightly's issue is its own. Both notify jobs run
    one at a time per nightly (a concurrency group each). Through the real ``gh`` against the fake API."""
    api = FakeGitHub(tmp_path / "api", tmp_path / "artifacts")
    try:
        api.repo("verl-project/verl")
        token = api.token("issues-token", issues="write")
        red = _night(tmp_path / "red", "fail", "REGRESSED tiny_fsdp_l1: layout; reproduce: python -m harness ...")
        for nightly in ("cpu", "cpu", "ascend"):
            proc = _issue(api, tmp_path, token, nightly, red)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        issues = api.repo("verl-project/verl").issues
        assert len(issues) == 2 and len(issues[1]["comments"]) == 1 and not issues[2]["comments"]
        assert {lb["name"] for lb in issues[1]["labels"]} == {"precision-debugger-regression", "precision-debugger-cpu"}
        proc = _issue(api, tmp_path, token, "cpu", _night(tmp_path / "error", "error"))
        assert issues[1]["state"] == "open" and len(issues[1]["comments"]) == 1, proc.stdout
        proc = _issue(api, tmp_path, token, "cpu", _night(tmp_path / "green", "pass"))
        assert proc.returncode == 0 and issues[1]["state"] == "closed" and issues[2]["state"] == "open", proc.stdout
        assert "issue #1 in verl-project/verl closed" in proc.stdout
        denied = _issue(api, tmp_path, api.token("read-only"), "cpu", red)
        (line,) = [ln for ln in denied.stdout.splitlines() if ln.startswith("::error")]
        assert denied.returncode == 2 and "grant the calling job issues: write" in line
        api.fault(r"/issues$", 500)
        broken = _issue(api, tmp_path, token, "cpu", red)
        (line,) = [ln for ln in broken.stdout.splitlines() if ln.startswith("::error")]
        assert broken.returncode == 2 and "(the API, not a verdict on verl)" in line and "500" in line
    finally:
        api.close()
    groups = {_load(WORKFLOWS / n)["jobs"]["notify"]["concurrency"]["group"] for n in ("nightly-cpu.yml",
                                                                                       "nightly-ascend.yml")}
    assert groups == {"precision-debugger-morning-cpu", "precision-debugger-morning-ascend"}


def test_every_caller_kind_prints():
    from harness.cli.caller import CALLERS, caller

    for kind in CALLERS:
        assert "uses: verl-project/verl-msprobe-harness/.github/workflows/" in caller(kind, "b" * 40,
                                                                                       "verl-project/verl-msprobe-harness")


@pytest.mark.integration
def test_a_red_harness_run_under_the_job_command_says_why_never_no_error_line(tmp_path):
    """The multi-node job runs `harness run` under `python3 -m harness.job run` with no annotations file: the job's
    line quotes the last line of the standard error, and `harness run` printed everything (its errors included) on the
    standard output, so a red multi-node night read "ERROR ... no error line" (the workflow engine's run). Its reason
    is now its standard error's last line."""
    env = {k: v for k, v in os.environ.items() if k != "SUBMITTER_URL"} | {"GITHUB_STEP_SUMMARY": str(tmp_path / "s")}
    argv = [sys.executable, "-m", "harness.job", "run", "--title", "t", "--", sys.executable, "-m", "harness", "run",
            str(ROOT / "scenarios" / "qwen2_0_5b_fsdp_multinode.yaml"), "--results", str(tmp_path / "r")]  # fmt: skip
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error")]
    assert "no error line" not in line and "NOTHING CHECKED: 0 of 1 scenarios ran here" in line, line
    assert proc.stderr.strip().splitlines()[-1].startswith("NOTHING CHECKED: 0 of 1 scenarios ran here")
