"""Every path a caller can take, run end to end by a real workflow engine (nektos/act, tests/workflow_engine.py): the
caller verl adds (printed by ``python -m harness caller``, pinned to this working tree's commit) calling this
repository's reusable workflows, on events as GitHub sends them, against the fake API (tests/fake_github.py). Each
test prints the engine's run (each job, its conclusion, its annotations, the run's minutes). The paths that train
verl's real trainer, and the two longest runs of the embedded one (several runs of the gate or the nightly in one test),
are the heavy tier; the light ones run the embedded CPU scenarios, and the Ascend and
multi-node workflows run with their runner stood in (docs/workflow-engine.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from workflow_engine import HARNESS_REPO, ROOT, Engine, Run, git, snapshot

from harness.cli.caller import caller

VERL = "verl-project/verl"
pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def harness_commit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    src = tmp_path_factory.mktemp("harness") / "src"
    return src, snapshot(src)


def overlay_venv(venv: Path) -> Path:
    """A venv of its own over this project's installed packages (a ``.pth``): what a workflow's ``pip install`` puts
    there lands in it, never in the project's venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    ours = next(venv.glob("lib/python3*/site-packages"))
    (ours / "runner.pth").write_text(purelib + "\n")
    pip = venv / "bin" / "pip"
    pip.write_text(f"#!/bin/sh\nexec {venv}/bin/python -m pip \"$@\"\n")
    pip.chmod(0o755)
    return venv


@pytest.fixture(scope="session")
def runner_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runner's warm environment: an overlay venv, no harness installed in it (each workflow's checkout is the
    harness it runs)."""
    venv = overlay_venv(tmp_path_factory.mktemp("runner") / "venv")
    pip = venv / "bin" / "pip"
    # the lock's exact versions where this project's venv has moved past them (its ranges), from the package index
    # here, so that `.ci/setup --locked` finds the runner holding the lock, as a warm hosted runner's cache makes it
    frozen = set(subprocess.run([str(pip), "freeze", "--exclude-editable"], capture_output=True, text=True,
                                check=True).stdout.lower().split())  # fmt: skip
    lock = re.findall(r"^([A-Za-z0-9][^ \\]*==[^ \\]+)", (ROOT / ".ci" / "cpu.lock").read_text(), re.M)
    if missing := [ln for ln in lock if ln.lower() not in frozen]:
        subprocess.run([str(pip), "install", "-q", "--no-deps", *missing], check=True, timeout=900)
    return venv


@pytest.fixture
def engine(tmp_path: Path, harness_commit: tuple[Path, str], runner_venv: Path, cache: Path) -> Iterator[Engine]:
    src, sha = harness_commit
    world = Engine(tmp_path, src, sha, runner_venv, cache)
    yield world
    world.close()


def shown(run: Run) -> Run:
    print(run.printed())
    return run


def pr_caller(engine: Engine, tmp: Path, scenarios: str = "") -> Path:
    """verl's caller, as ``python -m harness caller pr`` prints it for this working tree's commit (``scenarios``: the
    CPU gate's input, the embedded CPU scenarios in the light tier)."""
    text = caller("pr", engine.harness_sha, HARNESS_REPO)
    if scenarios:
        given = f"      scenarios: {scenarios}\n      harness-repository: "
        text = text.replace("      harness-repository: ", given, 1)
    path = tmp / "precision-debugger-gate.yml"
    path.write_text(text)
    return path


def pr_event(number: int, base: str, head: str, head_repo: str = VERL, action: str = "synchronize",
             label: str | None = None) -> dict:  # fmt: skip
    event = {"action": action, "number": number, "repository": {"full_name": VERL, "default_branch": "main"},
             "pull_request": {"number": number, "base": {"sha": base, "ref": "main", "repo": {"full_name": VERL}},
                              "head": {"sha": head, "ref": "pr", "repo": {"full_name": head_repo}}}}  # fmt: skip
    if label:
        event["label"] = {"name": label}
    return event


def test_a_pull_request_that_does_not_touch_the_integration_skips_the_gate_and_passes(engine, tmp_path):
    """A README change: the changes job reads the files API (nothing checked out), finds no integration file; the
    CPU and Ascend gates are skipped and cpu-gate-verdict, the required check, passes."""
    token = engine.api.token("pr-token", pull_requests="read")
    engine.api.pull(VERL, 7, files=[{"filename": "README.md", "status": "modified", "patch": "@@ -1 +1 @@\n-a\n+b"}])
    run = shown(engine.run(pr_caller(engine, tmp_path), "pull_request", pr_event(7, "a" * 40, "b" * 40),
                           repository=VERL, ref="refs/pull/7/merge", sha="c" * 40, token=token))  # fmt: skip
    assert run.result("changes") == "success", run.log[-3000:]
    assert "integration files changed: none" in "\n".join(run.job("changes").lines)
    assert run.result("cpu-gate") == "skipped" and run.result("ascend-gate") == "skipped"
    assert run.result("cpu-gate-verdict") == "success" and run.conclusion == "success"


def verdict(engine: Engine, changes: str, gate_result: str) -> subprocess.CompletedProcess[str]:
    """The required check's own step (``cpu-gate-verdict``) run as the caller holds it, with the results of the jobs
    it needs: act stops a run at a failed reusable-workflow call, so the engine never reaches it after a red gate
    (docs/workflow-engine.md)."""
    import yaml

    job = yaml.safe_load(caller("pr", engine.harness_sha, HARNESS_REPO))["jobs"]["cpu-gate-verdict"]
    (step,) = job["steps"]
    env = {"CHANGES": changes, "GATE": gate_result, "PATH": os.environ["PATH"]}
    return subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, check=False)


def red_verdict(engine: Engine, run: Run) -> None:
    """A red gate fails the required check: the engine's run of it where act reached it, else its step as the
    caller holds it."""
    if "cpu-gate-verdict" in run.jobs:
        assert run.result("cpu-gate-verdict") == "failure"
    else:
        assert verdict(engine, "success", run.result("cpu-gate")).returncode != 0


def pr_files(repo: Path, base: str, head: str) -> list[dict]:
    """The files API's answer for a pull request from ``base`` to ``head``: each file's name, status and patch."""
    out = []
    for line in git("diff", "--name-status", "-M", f"{base}..{head}", cwd=repo).splitlines():
        status, *names = line.split("\t")
        patch = git("diff", f"{base}..{head}", "--", *names, cwd=repo).split("\n@@", 1)
        entry = {"filename": names[-1], "status": {"M": "modified", "A": "added", "D": "removed"}.get(status[0],
                 "renamed"), "patch": "@@" + patch[1] if len(patch) > 1 else None}  # fmt: skip
        if len(names) > 1:
            entry["previous_filename"] = names[0]
        out.append(entry)
    return out


# the light tier's gate: the embedded CPU scenario, one run a side, structure and disk (compare's options, passed as a
# runner's environment: the reusable workflow's own defaults are the heavy tier's)
LIGHT = {"CPU_GATE_REPEATS": "--repeats 1 --max-repeats 1 --judge disk,structure"}


def gate(engine: Engine, tmp: Path, repo, head: str, number: int, *, head_repo: str = VERL, action: str = "synchronize",
         label: str | None = None, labels: tuple[str, ...] = (), token: str | None = None) -> Run:  # fmt: skip
    engine.remote(VERL, repo.path)
    engine.api.pull(VERL, number, files=pr_files(repo.path, repo.release, head),
                    labels=[{"name": n} for n in labels])  # fmt: skip
    token = token or engine.api.token(f"pr-token-{number}", pull_requests="read")
    event = pr_event(number, repo.release, head, head_repo, action, label)
    return shown(engine.run(pr_caller(engine, tmp, "scenarios/tiny_fsdp_l0.yaml"), "pull_request", event,
                            repository=VERL, ref=f"refs/pull/{number}/merge", sha=head, token=token, env=LIGHT))


@pytest.mark.trains
def test_a_breaking_head_fails_the_gate_its_finding_read_first(engine, tmp_path, repo):
    """``bad``: verl's integration no longer dumps actor_update. The CPU gate goes red, its first annotation the
    finding on verl (not the job's own line), and the required check fails with it; the Ascend gate runs only on
    verl's own runners' branches (skipped: its runner label has no runner here, tests below stand it in)."""
    run = gate(engine, tmp_path, repo, repo.bad, 11)
    assert run.result("cpu-gate/cpu-gate") == "failure", run.log[-5000:]
    job = run.job("cpu-gate/cpu-gate")
    errors = [f"{t}: {m}" for lv, t, m in job.annotations if lv == "error"]
    assert errors[0].startswith("precision_debugger gate: FAIL (exit 1: a regression of head: a verdict on the verl")
    assert errors[1].startswith("REGRESSED tiny_fsdp_l0: REGRESSED tiny_fsdp_l0: structure.actor_update"), errors
    assert any("missing dump dir step_2/actor_update" in e for e in errors)
    assert run.result("ascend-gate") == "skipped"
    red_verdict(engine, run)


def test_the_intended_label_accepts_the_head_it_was_set_on_and_no_later_push(engine, tmp_path):
    """The label read from the API accepted every later push of the pull request. Now the run of the labelling itself
    accepts, for the head that event names; a later push with the label still on is judged again (the changes job's
    ``accept`` output, which the gates' ``accept`` input follows)."""
    token = engine.api.token("pr-token", pull_requests="read")
    files = [{"filename": "verl/utils/profiler/precision_debugger_profile.py", "status": "modified", "patch": "+x"}]
    engine.api.pull(VERL, 9, files=files, labels=[{"name": "precision-debugger-intended"}])
    said = {}
    for action, head in (("labeled", "a" * 40), ("synchronize", "b" * 40)):
        event = pr_event(9, "c" * 40, head, action=action, label="precision-debugger-intended" if action == "labeled"
                         else None)  # fmt: skip
        run = shown(engine.run(pr_caller(engine, tmp_path), "pull_request", event, repository=VERL,
                               ref="refs/pull/9/merge", sha=head, token=token, job="changes"))  # fmt: skip
        assert run.result("changes") == "success", run.log[-3000:]
        (said[action],) = [ln for ln in run.job("changes").lines if ln.startswith("label ")]
    assert said["labeled"] == f"label precision-debugger-intended set on head {'a' * 40} by this run's event: true"
    assert said["synchronize"].endswith(": false")


def test_the_files_api_failing_or_no_token_is_one_line_and_never_a_pass(engine, tmp_path):
    """The API answering 500, and a run whose token may not read pull requests (a missing secret reads the same): the
    changes job fails in one line naming the API, the required check fails saying nothing was judged, never a pass
    and never a verdict on the pull request."""
    engine.api.pull(VERL, 5, files=[{"filename": "README.md", "status": "modified", "patch": "+x"}])
    engine.api.fault(r"/pulls/5/files", 500)
    tokens = engine.api.token("pr-token", pull_requests="read"), engine.api.token("no-pulls", pull_requests="none")
    for token in tokens:
        run = shown(engine.run(pr_caller(engine, tmp_path), "pull_request", pr_event(5, "a" * 40, "b" * 40),
                               repository=VERL, ref="refs/pull/5/merge", sha="c" * 40, token=token))  # fmt: skip
        changes = run.job("changes").first()
        assert changes.startswith("precision_debugger changes: the pull request's files could not be read from the API")
        assert "not a verdict on the pull request" in changes and ("500" in changes or "403" in changes), changes
        # its line is held by the required check's own test: act may drop what a step prints as it exits (its gap)
        assert run.result("cpu-gate") == "skipped" and run.result("cpu-gate-verdict") == "failure"
        engine.api.faults.clear()


@pytest.mark.trains
def test_an_unchanged_head_from_a_fork_passes_with_a_read_only_token_and_no_secret(engine, tmp_path, repo):
    """``neutral`` (a comment) from a fork: the CPU gate runs on the hosted runner with the pull request's read-only
    token (the fake API refuses it any write) and no secret (none is passed: the reusable workflow declares none),
    and passes; the Ascend gate never runs a fork's code."""
    token = engine.api.token("fork-token", pull_requests="read", contents="read", issues="read")
    run = gate(engine, tmp_path, repo, repo.neutral, 13, head_repo="someone/verl", token=token)
    assert run.result("cpu-gate/cpu-gate") == "success", run.log[-5000:]
    assert run.job("cpu-gate/cpu-gate").annotations[-1][2].startswith("PASS (exit 0)"), run.printed()
    assert run.result("cpu-gate-verdict") == "success" and run.result("ascend-gate") == "skipped"
    assert not [c for c in engine.api.calls if c[0] != "GET"]  # nothing written with the pull request's token


@pytest.mark.heavy
@pytest.mark.trains
def test_a_head_labelled_intended_passes_and_a_later_push_is_judged_again(engine, tmp_path, repo):
    """``bad`` labelled precision-debugger-intended: the labelling's run passes as ACCEPTED for that head, its findings
    still listed; the next push (the same breaking change, the label still on) is judged again, red."""
    labelled = gate(engine, tmp_path, repo, repo.bad, 15, action="labeled", label="precision-debugger-intended",
                    labels=("precision-debugger-intended",))  # fmt: skip
    job = labelled.job("cpu-gate/cpu-gate")
    assert labelled.result("cpu-gate/cpu-gate") == "success", labelled.log[-5000:]
    assert any(t.startswith("REGRESSED tiny_fsdp_l0") for _, t, _ in job.annotations), labelled.printed()
    accepted = ("notice", "ACCEPTED as intended", f"label precision-debugger-intended on {repo.bad}")
    assert accepted in job.annotations, labelled.printed()
    pushed = gate(engine, tmp_path, repo, repo.bad, 15, labels=("precision-debugger-intended",))
    assert pushed.result("cpu-gate/cpu-gate") == "failure"
    red_verdict(engine, pushed)


def test_the_required_check_passes_a_passed_or_skipped_gate_only(engine):
    """cpu-gate-verdict, the check verl requires: green where the gate passed or did not need to run, red where it
    failed, was cancelled or the changes job did not succeed (its own line then: nothing was judged)."""
    for changes, gate_result, passes in (("success", "success", True), ("success", "skipped", True),
                                         ("success", "failure", False), ("success", "cancelled", False),
                                         ("failure", "skipped", False)):  # fmt: skip
        proc = verdict(engine, changes, gate_result)
        assert (proc.returncode == 0) == passes, (changes, gate_result, proc.stdout)
    assert "::error title=precision_debugger gate::the changes job ended failure" in proc.stdout


def nightly_caller(engine: Engine, tmp: Path) -> Path:
    """verl's nightly caller as printed for this commit, its CPU nightly given the embedded CPU scenario and no duet
    (the light tier: the night's own runs, its gate against the last good night, the history, the issue)."""
    text = caller("nightly", engine.harness_sha, HARNESS_REPO)
    light = "      scenarios: scenarios/tiny_fsdp_l0.yaml\n      duet: false\n      accept-baseline: ${{ inputs"
    text = text.replace("      accept-baseline: ${{ inputs", light, 1) if "cpu-nightly" in text else text
    head, sep, tail = text.partition("  cpu-nightly:")
    text = head + sep + tail.replace("      accept-baseline: ${{ inputs", light, 1)
    path = tmp / "precision-debugger-nightly.yml"
    path.write_text(text)
    return path


@pytest.mark.heavy
@pytest.mark.trains
def test_the_cpu_nightly_over_five_nights_one_issue_opened_commented_closed_and_an_accepted_night(engine, tmp_path,
                                                                                                   repo):  # fmt: skip
    """verl's nightly caller, its CPU nightly on the pinned msprobe, night after night on verl main as it moves: a quiet
    night (green, no issue, the series started); ``bad`` merged (red, one issue opened with the finding and its
    reproduce command); still ``bad`` (red, a comment on that issue); back to a good verl (green, the issue closed);
    the change made again and dispatched with accept-baseline (green as ACCEPTED, no issue). Every night appends one
    commit to the history
    branch, and each night is gated against the last good night's baseline, found among the runs by the API."""
    bare = engine.remote(VERL, repo.path)
    token = engine.api.token("nightly-token", contents="write", issues="write", actions="read")
    workflow = nightly_caller(engine, tmp_path)
    # verl main only moves forward: ``bad`` merged, a night later still there, then reverted, then made again
    work = tmp_path / "verl-main"
    git("clone", "-q", str(bare), str(work))
    git("checkout", "-q", repo.bad, cwd=work)
    git("revert", "--no-edit", "HEAD", cwd=work)
    fixed = git("rev-parse", "HEAD", cwd=work)
    git("revert", "--no-edit", "HEAD", cwd=work)
    again = git("rev-parse", "HEAD", cwd=work)
    git("push", "-q", str(bare), f"{again}:refs/heads/again", cwd=work)
    nights = [(repo.release, "schedule", False), (repo.bad, "schedule", False), (repo.bad, "schedule", False),
              (fixed, "schedule", False), (again, "workflow_dispatch", True)]  # fmt: skip
    issues = engine.api.repo(VERL).issues
    said = []
    for n, (commit, event, accept) in enumerate(nights, 1):
        git("update-ref", "refs/heads/main", commit, cwd=bare)
        payload = {"repository": {"full_name": VERL, "default_branch": "main", "name": "verl"},
                   "ref": "refs/heads/main"}  # fmt: skip
        if accept:
            payload["inputs"] = {"accept-baseline": "true"}  # as GitHub sends a dispatch's inputs: strings
        run = shown(engine.run(workflow, event, payload, repository=VERL, ref="refs/heads/main", sha=commit,
                               token=token, matrix=["msprobe:pinned"]))  # fmt: skip
        said.append((n, run.result("cpu-nightly/nightly"), len(issues), [len(i["comments"]) for i in issues.values()],
                     [i["state"] for i in issues.values()]))  # fmt: skip
        assert run.result("cpu-nightly/history") == "success", run.log[-4000:]
    print(said)
    assert [s[1] for s in said] == ["success", "failure", "failure", "success", "success"], said
    (issue,) = issues.values()
    assert len(issue["comments"]) == 2 and issue["state"] == "closed", said  # a red night's comment, the green one's
    assert "reproduce: python -m harness" in issue["body"] and "actor_update" in issue["body"]
    history = git("log", "--format=%s", "precision-debugger-history", cwd=bare).splitlines()
    assert len(history) == len(nights), history  # one commit a night, never twice


# --- verl's Ascend runners, stood in: the CPU scenario in the Ascend jobs' own scripts -------------------------------

ASCEND = "linux-aarch64-a2b3-8"  # verl's Ascend runners' label, the workflows' default
GSM8K = '''"""A stand-in of verl's examples/data_preprocess/gsm8k.py: verl's runners hold gsm8k in their cache,
this host does not; the CPU scenario that trains in place of the NPU one reads none. It writes where verl's does."""
import argparse
import pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--local_dataset_path")
parser.add_argument("--local_save_dir", default="~/data/gsm8k")
out = pathlib.Path(parser.parse_args().local_save_dir).expanduser()
out.mkdir(parents=True, exist_ok=True)
for split in ("train", "test"):
    (out / f"{split}.parquet").write_bytes(b"")
print(f"gsm8k stand-in: {out}")
'''


def ascend_tools(tmp: Path) -> tuple[dict[str, str], Path]:
    """What a job container of verl's Ascend image holds and this host does not, on the runner's PATH: ``npu-smi``
    (no NPU here: the CPU scenario trains in place of the NPU training); the image's ``python3``, an overlay venv of
    its own (what ``.ci/ascend-job setup job-container`` installs lands there), each call logged with the job's
    deadline as it reached it (bash: a POSIX sh would drop the actions' ``INPUT_A-B`` variables); ``ray``: the
    night's ``ray stop --force`` clears an Ascend runner of an earlier job's Ray, here it would stop other tests' Ray
    on a shared host, so it stops none."""
    image = overlay_venv(tmp / "image")
    log = tmp / "python3.log"
    return {
        "npu-smi": "#!/bin/sh\necho 'npu-smi stand-in: no NPU on this host; the CPU scenario trains in its place'\n",
        "python3": f'#!/bin/bash\necho "$(date +%s) ${{JOB_ENDS_BY:--}} ${{HARNESS_DEADLINE:--}} $*" >> {log}\n'
                   f'exec {image}/bin/python3 "$@"\n',
        "ray": "#!/bin/sh\necho \"ray stand-in: 'ray $*' stops nothing on a shared host\"\n",
    }, log  # fmt: skip


def verl_with_gsm8k(engine: Engine, repo, tmp: Path) -> tuple[str, str]:
    """verl's remote for the Ascend jobs: ``main`` the fixture's release with verl's gsm8k preparation script (stood
    in), and ``bad`` on top of it; their commits."""
    work = tmp / "verl-ascend"
    git("clone", "-q", str(repo.path), str(work))
    git("checkout", "-q", "-B", "main", repo.release, cwd=work)
    script = work / "examples" / "data_preprocess" / "gsm8k.py"
    script.parent.mkdir(parents=True)
    script.write_text(GSM8K)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "verl's gsm8k preparation (stand-in)", cwd=work)
    good = git("rev-parse", "HEAD", cwd=work)
    git("cherry-pick", repo.bad, cwd=work)
    bad = git("rev-parse", "HEAD", cwd=work)
    git("branch", "-f", "bad", bad, cwd=work)
    git("checkout", "-q", "main", cwd=work)
    engine.remote(VERL, work)
    return good, bad


def ascend_nightly_caller(engine: Engine, tmp: Path) -> Path:
    """verl's nightly caller as printed for this commit, its Ascend nightly given the CPU scenario (``tiny_fsdp_l0``)
    and no image: the job runs on the runner itself, as the docker mode's job does (no container), its python3 the
    stand-in of the image's (``ascend_tools``); mode, runner label and every other input as printed."""
    text = caller("nightly", engine.harness_sha, HARNESS_REPO)
    given = "      mode: job-container\n      image: ''\n      scenarios: '[\"tiny_fsdp_l0\"]'\n"
    assert text.count("      mode: job-container\n") == 1
    path = tmp / "precision-debugger-nightly.yml"
    path.write_text(text.replace("      mode: job-container\n", given))
    return path


def budget_of(log: Path, command: str = "-m harness run ") -> tuple[float, float, float]:
    """From the image python's log: the first call's time, the job's deadline (JOB_ENDS_BY, set by the job's first
    step) and the deadline the trainings' ``command`` was given (HARNESS_DEADLINE)."""
    calls = [ln.split(" ", 3) for ln in log.read_text().splitlines()]
    first = next(c for c in calls if c[1] != "-")
    (run,) = [c for c in calls if c[3].startswith(command)]
    return float(first[0]), float(first[1]), float(run[2])


NIGHT_ENV = {"GITHUB_WORKFLOW": "precision-debugger-nightly"}


@pytest.mark.heavy  # minutes: the heavy tier (.ci/run stays under its 20 minutes)
@pytest.mark.trains
def test_the_ascend_nightly_on_its_runner_stood_in_two_nights_gated_its_budget_from_the_jobs_start(
    engine, tmp_path, repo
):
    """verl's nightly caller's Ascend job (PRECISION_DEBUGGER_ASCEND set), its runner label mapped to this host and
    the CPU scenario in place of the NPU one, through the job's own scripts (.ci/ascend-job setup, gsm8k, nightly):
    a first night starts its series (green, the baseline published, the history started); ``bad`` merged, the next
    night is gated against that baseline, found among this workflow's runs (another workflow's newer run holds an
    artifact of the same name: passed over), and is red, a verdict on verl, its finding read first, the last good
    baseline carried forward. The night's deadline is the job's (JOB_ENDS_BY from its first step: 40 minutes less
    the pull and the uploads) and reaches the trainings (HARNESS_DEADLINE). A night's issue token that may not write
    issues: the notify job's one line, never a verdict (the night's own verdict stands)."""
    good, bad = verl_with_gsm8k(engine, repo, tmp_path)
    engine.api.repo(VERL)
    bare = engine.remotes / f"{VERL}.git"
    workflow = ascend_nightly_caller(engine, tmp_path)
    name = "precision-debugger-baseline-main-tiny_fsdp_l0-job-container"
    payload = {"repository": {"full_name": VERL, "default_branch": "main", "name": "verl"}, "ref": "refs/heads/main"}
    runs = []
    for night, (commit, issues) in enumerate(((good, "write"), (bad, "read")), 1):
        git("update-ref", "refs/heads/main", commit, cwd=bare)
        if night == 2:  # another workflow's run, newer than the first night, with an artifact of the series' name
            decoy = engine.api.next_run_id()
            (engine.artifacts / str(decoy) / name).mkdir(parents=True)
            (engine.artifacts / str(decoy) / name / "baseline.json").write_text("{}")
            engine.api.run(VERL, id=decoy, event="schedule", head_branch="main", conclusion="success", head_sha=commit,
                           path=".github/workflows/other.yml", head_repository={"full_name": VERL})  # fmt: skip
        token = engine.api.token(f"ascend-{night}", contents="write", issues=issues, actions="read")
        tools, log = ascend_tools(tmp_path / f"night{night}")
        run = shown(engine.run(workflow, "schedule", payload, repository=VERL, ref="refs/heads/main", sha=commit,
                               token=token, job="nightly", labels=(ASCEND,), tools=tools, env=NIGHT_ENV,
                               variables={"PRECISION_DEBUGGER_ASCEND": "true"}))  # fmt: skip
        first, ends_by, deadline = budget_of(log)
        print(f"night {night}: JOB_ENDS_BY {ends_by - first:+.0f} s from the first python3 call, the trainings' "
              f"HARNESS_DEADLINE {deadline - ends_by:+.0f} s from it")  # fmt: skip
        assert first - 120 <= ends_by - (40 - 5 - 3) * 60 <= first, (first, ends_by)  # counted from the job's start
        assert deadline <= ends_by
        runs.append(run)
    one, two = runs
    job = one.job("nightly/nightly")
    assert one.result("nightly/nightly") == "success", one.log[-6000:]
    assert ("warning", "precision_debugger nightly", "no previous baseline of tiny_fsdp_l0 (main): this night starts "
            "its series (nothing gated)") in job.annotations, one.printed()  # fmt: skip
    assert job.annotations[-1][2].startswith("PASS (exit 0)"), one.printed()
    assert one.result("nightly/history") == "success" and one.result("nightly/notify") == "success"
    assert (engine.artifacts / str(one.id) / name / "baseline.json").is_file()
    job = two.job("nightly/nightly")
    assert two.result("nightly/nightly") == "failure", two.log[-6000:]
    found = [ln for ln in job.lines if "previous baseline" in ln]
    assert any(f"previous baseline {name}: run {one.id} (schedule on main" in ln for ln in found), found
    assert job.first().startswith("precision_debugger gate: FAIL (exit 1: a regression of head: a verdict on the verl")
    assert "structure.actor_update" in "\n".join(m for _, _, m in job.annotations), two.printed()
    assert (engine.artifacts / str(two.id) / name / "baseline.json").is_file()  # the last good one, carried forward
    notify = two.job("nightly/notify")
    assert two.result("nightly/notify") == "failure" and "the token may not write issues" in notify.first(), notify
    assert "verdict on verl" not in notify.first()
    assert not [m for _, _, m in notify.annotations if "no error line" in m], notify.annotations  # the job's line too
    assert not engine.api.repo(VERL).issues
    history = git("log", "--format=%s", "precision-debugger-history", cwd=bare).splitlines()
    assert len(history) == 2, history


def ascend_gate_caller(engine: Engine, tmp: Path) -> Path:
    """verl's pull-request caller as printed for this commit, its Ascend gate given the CPU scenario, one run a side
    and no more (``max-repeats``: the embedded scenario's overhead is not the Ascend one's to decide) and no image
    (the job on the runner itself, its python3 the image's stand-in: ``ascend_tools``)."""
    text = caller("pr", engine.harness_sha, HARNESS_REPO)
    ours = "      scenarios: scenarios/qwen2_0_5b_fsdp_l0.yaml"
    assert text.count(ours) == 1
    given = "      scenarios: scenarios/tiny_fsdp_l0.yaml\n      image: ''\n      max-repeats: 1\n      # "
    path = tmp / "precision-debugger-gate.yml"
    path.write_text(text.replace(ours + "  # ", given))
    return path


@pytest.mark.heavy  # minutes: the heavy tier (.ci/run stays under its 20 minutes)
@pytest.mark.trains
def test_the_ascend_pull_request_gate_on_its_runner_stood_in_fails_a_breaking_head_its_finding_first(
    engine, tmp_path, repo
):
    """verl's pull-request caller's Ascend gate (a branch of verl's own, PRECISION_DEBUGGER_ASCEND set), its runner
    label mapped to this host and the CPU scenario in place of the NPU one, through its own scripts (.ci/ascend-job
    setup, gsm8k, compare: head against its merge base with the base, one checkout of verl's history): ``bad`` is red,
    its first annotation the finding on verl; the compare's deadline is the job's (JOB_ENDS_BY, 40 minutes less the
    pull and the upload) and reaches the trainings."""
    good, bad = verl_with_gsm8k(engine, repo, tmp_path)
    work = tmp_path / "verl-ascend"
    engine.api.pull(VERL, 21, files=pr_files(work, good, bad))
    token = engine.api.token("pr-token-21", pull_requests="read")
    tools, log = ascend_tools(tmp_path)
    run = shown(engine.run(ascend_gate_caller(engine, tmp_path), "pull_request", pr_event(21, good, bad),
                           repository=VERL, ref="refs/pull/21/merge", sha=bad, token=token, job="ascend-gate",
                           labels=(ASCEND,), tools=tools, variables={"PRECISION_DEBUGGER_ASCEND": "true"}))  # fmt: skip
    first, ends_by, deadline = budget_of(log, "-m harness compare ")
    print(f"JOB_ENDS_BY {ends_by - first:+.0f} s from the first python3 call, the compare's HARNESS_DEADLINE "
          f"{deadline - ends_by:+.0f} s from it")  # fmt: skip
    assert first - 120 <= ends_by - (40 - 3 - 2) * 60 <= first and deadline <= ends_by
    assert run.result("changes") == "success" and run.result("ascend-gate/compare") == "failure", run.log[-6000:]
    job = run.job("ascend-gate/compare")
    errors = [f"{t}: {m}" for lv, t, m in job.annotations if lv == "error"]
    assert errors[0].startswith("precision_debugger gate: FAIL (exit 1: a regression of head: a verdict on the verl")
    assert errors[-1].startswith("precision_debugger Ascend gate: FAIL (exit 1): a regression of head"), run.printed()
    assert any("missing dump dir step_2/actor_update" in e for e in errors), errors
    assert (engine.artifacts / str(run.id) / "verl-compare-results").is_dir()


# --- verl's multi-node runners, stood in: the fake RayJob submitter in place of verl's --------------------------------

A3 = "linux-aarch64-a3-8"  # verl's multi-node runners' label, the workflow's default
MULTINODE = "qwen2_0_5b_fsdp_multinode"


def harness_with(base: Path, tmp: Path, files: dict[str, str]) -> tuple[Path, str]:
    """The harness under test with ``files`` added (path: text), as a commit of its own: a caller pins that commit."""
    src = tmp / "harness"
    git("clone", "-q", str(base), str(src))
    for rel, text in files.items():
        (src / rel).write_text(text)
    git("add", "-A", cwd=src)
    git("commit", "-q", "-m", "a scenario of the test's", cwd=src)
    return src, git("rev-parse", "HEAD", cwd=src)


def multinode_caller(sha: str, tmp: Path, submitter: str, scenario: str) -> Path:
    """verl's multi-node caller as printed for ``sha``, given the fake submitter, no cluster DNS (this host resolves
    127.0.0.1), no image (the job on the runner itself, its python3 the image's stand-in) and ``scenario``."""
    text = caller("multinode", sha, HARNESS_REPO)
    ours = "      verl-ref: main\n"
    assert text.count(ours) == 1
    given = (f"{ours}      submitter-url: {submitter}\n      cluster-dns: ''\n      image: ''\n"
             f"      scenarios: '[\"{scenario}\"]'\n")  # fmt: skip
    path = tmp / "precision-debugger-multinode.yml"
    path.write_text(text.replace(ours, given))
    return path


def curl_only(handler) -> None:
    """A DELETE the submitter answers from the workflow's clean-up step (curl) only: the harness's own DELETE finds
    it restarting, as a harness killed before its DELETE would have sent none."""
    if handler.headers.get("User-Agent", "").startswith("curl/"):
        handler.server.remove(handler.path)
        handler.send(200, b'{"deleted": 1}')
    else:
        handler.send(503, b"the submitter is restarting")


@pytest.mark.heavy  # minutes (two attempts, each DELETE tried for its 20 s): the heavy tier
@pytest.mark.integration
def test_the_multinode_workflow_with_the_fake_submitter_says_verls_crash_and_the_clean_up_deletes_its_rayjobs(
    tmp_path, harness_commit, runner_venv, cache, repo
):
    """verl's multi-node caller, its runner label mapped to this host and the repository's fake RayJob submitter
    (tests/fake_servers.py) in place of verl's, through the job's own steps: the set-up into the image's python, the
    paths of this job's directory in the scenario's shared cache (the multi-node scenario, its shared cache and wheels
    dir moved under the test's directory: a commit of the harness of the test's), the submitter's health check, gsm8k
    and msprobe's wheel there, what each training submits, the run, the results kept and the clean-up. Each RayJob
    ends FAILED with verl's traceback in its log, off and on alike: red, not a verdict (nothing tells the inputs, the
    runner and verl's trainer apart without a base), its line naming verl's raise (it read "no error line": `harness
    run` said it on its standard output only); the harness's own DELETE is refused (the submitter restarting: as a
    cancelled job's harness sends none), its one line said, and the clean-up step DELETEs every RayJob it posted, the
    retry's included, and removes the job's directory: nothing left, alive or on disk."""
    from fake_servers import STARTED, ev, serving
    from test_rayjob import TRACEBACK

    shared, wheels = tmp_path / "cicd_test", tmp_path / "wheels"
    text = (ROOT / "scenarios" / f"{MULTINODE}.yaml").read_text()
    assert text.count("\n  rayjob:\n") == 1 and "cache:" not in text and "wheels_dir:" not in text
    text = text.replace("\n  rayjob:\n", f"\n  rayjob:\n    cache: {shared}\n    wheels_dir: {wheels}\n")
    src, sha = harness_with(harness_commit[0], tmp_path, {f"scenarios/{MULTINODE}_here.yaml": text})
    engine = Engine(tmp_path / "engine", src, sha, runner_venv, cache)
    try:
        good, _ = verl_with_gsm8k(engine, repo, tmp_path)
        engine.api.repo(VERL)
        token = engine.api.token("multinode-token", contents="read")
        tail = [ev("log", line=ln) for ln in TRACEBACK.splitlines()]
        watch = [STARTED, *tail, ev("final", status="FAILED", message="the job's entrypoint exited 1")]
        with serving(watches=[watch], delete=curl_only) as submitter:
            workflow = multinode_caller(sha, tmp_path, submitter.url, f"{MULTINODE}_here")
            tools, _ = ascend_tools(tmp_path)
            payload = {"repository": {"full_name": VERL, "default_branch": "main", "name": "verl"}}
            run = shown(engine.run(workflow, "schedule", payload, repository=VERL, ref="refs/heads/main", sha=good,
                                   token=token, labels=(A3,), tools=tools))  # fmt: skip
        job = run.job("multinode/multinode")
        assert run.result("multinode/multinode") == "failure", run.log[-6000:]
        first = job.first()
        assert first.startswith(f"precision_debugger multinode {MULTINODE}_here: ERROR (2 attempts), not a verdict")
        assert "both runs failed the same way, precision_debugger off and on: verl raised ValueError: Unknown " \
               "precision_debugger stage: train_batch" in first and "no error line" not in first, run.printed()
        posted = [p for m, p in submitter.requests if m == "POST"]
        deletes = submitter.deleted()
        assert len(posted) == 4 and submitter.alive() == [], (submitter.requests, submitter.runs)  # 2 attempts x 2
        assert all(re.fullmatch(rf"/api/v1/workflows/{run.id}-[0-9a-f]{{6}}\?attempt=1", d) for d in deletes), deletes
        lines = "\n".join(job.lines)
        # the harness's own line (its standard error, cut by the progress line's redraws in the job's log)
        assert "harness: DELETE of RayJob run" in lines and "503: the submitter is restarting" in lines
        assert not list((shared / "verl-msprobe-harness").glob("job-*")), "the job's directory is left"
        assert (engine.artifacts / str(run.id) / f"multinode-results-{MULTINODE}_here").is_dir()
    finally:
        engine.close()


@pytest.mark.integration
def test_the_ascend_nightly_whose_api_fails_is_one_line_and_never_an_ungated_night(engine, tmp_path, repo):
    """The runs' listing answering 500 as the night looks for its last good baseline: the nightly job fails in the
    finder's one line (not a verdict on verl), no training runs, no baseline is published; the history job says no
    night was recorded. Before: an unhandled Octokit error."""
    good, _ = verl_with_gsm8k(engine, repo, tmp_path)
    engine.api.repo(VERL)
    engine.api.fault(r"/actions/workflows/", 500)
    token = engine.api.token("ascend", contents="write", issues="write", actions="read")
    tools, log = ascend_tools(tmp_path)
    payload = {"repository": {"full_name": VERL, "default_branch": "main", "name": "verl"}, "ref": "refs/heads/main"}
    run = shown(engine.run(ascend_nightly_caller(engine, tmp_path), "schedule", payload, repository=VERL,
                           ref="refs/heads/main", sha=good, token=token, job="nightly", labels=(ASCEND,), tools=tools,
                           env=NIGHT_ENV, variables={"PRECISION_DEBUGGER_ASCEND": "true"}))  # fmt: skip
    job = run.job("nightly/nightly")
    assert run.result("nightly/nightly") == "failure", run.log[-6000:]
    assert job.first() == (": precision_debugger nightly: the last good baseline precision-debugger-baseline-main-"
                           "tiny_fsdp_l0-job-container could not be looked up (HTTP 500: Server Error - "
                           "https://docs.github.com/rest): not a verdict on verl; re-run the workflow"), run.printed()
    assert not [ln for ln in log.read_text().splitlines() if " -m harness run " in f" {ln.split(' ', 3)[3]}"]
    assert run.result("nightly/history") == "failure"
    assert "no night's results to append" in run.job("nightly/history").first()


@pytest.mark.integration
def test_a_runner_label_no_runner_has_is_one_line_never_a_silent_green(engine, tmp_path, repo):
    """The Ascend nightly's runner label mapped to no runner here: act skips the job (GitHub queues it, then fails it
    after a day, saying no runner took it); either way no night runs, and the history job says so in one line naming
    the job's end and its labels, red, not a verdict on verl; no baseline, no issue."""
    good, _ = verl_with_gsm8k(engine, repo, tmp_path)
    engine.api.repo(VERL)
    token = engine.api.token("ascend", contents="write", issues="write", actions="read")
    payload = {"repository": {"full_name": VERL, "default_branch": "main", "name": "verl"}, "ref": "refs/heads/main"}
    run = shown(engine.run(ascend_nightly_caller(engine, tmp_path), "schedule", payload, repository=VERL,
                           ref="refs/heads/main", sha=good, token=token, job="nightly", env=NIGHT_ENV,
                           variables={"PRECISION_DEBUGGER_ASCEND": "true"}))  # fmt: skip
    assert run.result("nightly/nightly") == "skipped", run.log[-6000:]
    assert run.result("nightly/history") == "failure" and run.conclusion == "failure"
    line = run.job("nightly/history").first()
    assert line == ("precision_debugger history: no night's results to append (the nightly's jobs kept none: the "
                    f"nightly job's result: none, never started, on runner labels [\"{ASCEND}\"]): this night is not "
                    "recorded, not a verdict on verl; the nightly's own jobs say why"), run.printed()  # fmt: skip
    assert not engine.api.repo(VERL).issues and not list(engine.artifacts.glob("*/precision-debugger-baseline-*"))
