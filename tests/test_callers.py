"""Every documented caller, read as verl's CI would run it: with the inputs it documents it can end green on an
unchanged verl and red on a breaking one (what each decides, whom it tells, in what time)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from builders import write_scenario
from conftest import SMALL_TARGET

from harness import config
from harness.artifacts.figures import FAMILIES
from harness.cli import main
from harness.errors import InfraError
from harness.gate.judge import ComparePolicy
from harness.pipeline.base_head import families, structure_order
from harness.report import verdicts
from harness.scenario.loader import load_scenario
from harness.targets.pair import merge_base
from harness.targets.spec import parse_target, reproducible
from harness.training.deadline import REPORT_RESERVE_S, training_limit

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _inputs(name: str) -> dict:
    return _load(WORKFLOWS / name)[True]["workflow_call"]["inputs"]


def test_the_ascend_gate_decides_what_one_run_a_side_can_and_leaves_overhead_to_the_nightly():
    """verl-compare.yml with the caller's inputs (one scenario, one run a side): base once, head once, no pair added
    while an overhead ratio is undecided (two runs cannot decide one: the old default kept adding pairs to 6 a side,
    past the 40-minute job, or ended INCONCLUSIVE, which failed it); structure, layout, contents, disk, numerics and
    crash decided, overhead reported. The label that accepts an intended change reaches it as it reaches the CPU
    gate."""
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")["jobs"]
    gate = caller["ascend-gate"]["with"]
    inputs = _inputs("verl-compare.yml")
    repeats = gate.get("repeats", inputs["repeats"]["default"])
    paths = sorted(ROOT.glob(gate.get("scenarios", inputs["scenarios"]["default"])))
    assert repeats == 1 and paths
    for path in [*paths, *sorted((ROOT / "scenarios").glob("qwen2_0_5b_*.yaml"))]:
        scenario = load_scenario(path)
        decided = families(scenario, FAMILIES)
        assert decided == {"disk", "structure"}, (path.name, decided)
        assert structure_order(repeats) == [("base", 0), ("head", 0)]
    assert gate["accept"] == caller["cpu-gate"]["with"]["accept"]
    assert _load(WORKFLOWS / "verl-compare.yml")["jobs"]["compare"]["env"]["HARNESS_ACCEPT"] == "${{ inputs.accept }}"


# -- the pair compared is the pull request's change (harness.targets.pair) -----------------------------------------
def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=os.environ | env)
    return out.stdout.strip()


def _commit(repo: Path, name: str) -> str:
    (repo / f"{name}.txt").write_text(name)
    _git(repo, "add", f"{name}.txt")
    _git(repo, "commit", "-q", "-m", name)
    return _git(repo, "rev-parse", "HEAD")


def moved_main(tmp_path: Path) -> dict[str, str]:
    """main: root - point - fix1 - fix2 (moved after the pull request branched at point); pr: point - change;
    merge: GitHub's refs/pull/N/merge, main's tip merged with pr (first parent main)."""
    repo = tmp_path / "verl"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    c = {"root": _commit(repo, "root"), "point": _commit(repo, "point")}
    _git(repo, "checkout", "-q", "-b", "pr")
    c["change"] = _commit(repo, "change")
    _git(repo, "checkout", "-q", "main")
    c["fix1"], c["fix2"] = _commit(repo, "fix1"), _commit(repo, "fix2")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "pr")
    c["merge"] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "reset", "-q", "--hard", c["fix2"])
    _git(repo, "checkout", "-q", "--orphan", "other")
    c["unrelated"] = _commit(repo, "unrelated")
    return c


def test_the_pair_is_the_pull_requests_change_where_main_moved_after_the_branch_point(tmp_path, capsys):
    """pull_request.base.sha is main's tip (fix2), two commits past where the pull request branched: compared is
    head against the branch point, and the report says so; GitHub's merge commit against its first parent as given;
    a head that is not a descendant of the base, unrelated histories and two repositories are one line each, exit 2
    (the gates compared main's tip: its two commits were blamed on the pull request)."""
    c = moved_main(tmp_path)
    repo = tmp_path / "verl"
    spec = parse_target(f"{repo}@{c['fix2']}", verl_option="--base").verl
    head = parse_target(f"{repo}@pr", verl_option="--head").verl
    base, line = merge_base(spec, head)
    assert base.commit == c["point"] and head.commit == c["change"]
    assert "the base branch moved 2 commit(s) after the pull request branched; compared against their merge base " \
           f"{c['point'][:12]} (the branch point)" in line  # fmt: skip
    merged = parse_target(f"{repo}@{c['merge']}").verl
    assert merge_base(spec, merged)[0].commit == c["fix2"]  # refs/pull/N/merge and its first parent: as given
    assert "a merge commit: the pull request as it would merge" in merge_base(spec, merged)[1]
    same = merge_base(spec, spec)
    assert same[0].commit == c["fix2"] and "(A/A)" in same[1]
    assert main(["pair", "--base", f"{repo}@main", "--head", f"{repo}@pr"]) == 0
    assert capsys.readouterr().out == f"base={c['point']}\nhead={c['change']}\n"
    for base_ref, head_ref, said in (
        ("pr", c["point"], "is not a descendant of base pr"),
        ("main", "other", "share no history"),
    ):
        assert main(["pair", "--base", f"{repo}@{base_ref}", "--head", f"{repo}@{head_ref}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("TARGET ERROR: ") and said in err[0], err
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert main(["pair", "--base", f"{clone}@main", "--head", f"{repo}@pr"]) == 2
    assert "of one repository" in capsys.readouterr().err


def test_the_gates_compare_head_with_its_merge_base_from_one_checkout_of_its_history():
    """Both reusable gates check verl out once, with its history, and pass both refs of that checkout to a compare
    that takes their merge base (they compared pull_request.base.sha: the base branch's tip)."""
    for name, script in (("verl-cpu-gate.yml", "cpu-gate"), ("verl-compare.yml", "ascend-job")):
        (job,) = _load(WORKFLOWS / name)["jobs"].values()
        checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
        (verl,) = [s for s in checkouts if s["with"].get("path", "").startswith(".verl")]
        assert verl["with"]["path"] == ".verl/head" and verl["with"]["fetch-depth"] == 0
        assert '".verl/head@$BASE_REF" ".verl/head@$HEAD_REF"' in " ".join(s.get("run", "") for s in job["steps"])
        assert "--merge-base" in (ROOT / ".ci" / script).read_text()


@pytest.mark.integration
@pytest.mark.trains
def test_the_cpu_gate_does_not_blame_a_pull_request_for_what_main_merged_after_it_branched(tmp_path, repo, cache):
    """The CPU gate as the caller runs it on the fixture repository: main moved after the pull request branched (it
    merged ``bad``: actor_update no longer dumped); the pull request is ``neutral`` (a comment). pull_request.base.sha
    is main's tip: compared against it, head dumps a stage base does not (REGRESSED structure, blamed on the pull
    request); against the merge base, PASS, and the report names the pair."""
    scenario = write_scenario(tmp_path, name="tiny_fsdp_l1", **SMALL_TARGET)
    results = tmp_path / "results"
    env = os.environ | {"HARNESS_CACHE_DIR": str(cache), "RESULTS": str(results), "HARNESS_STACK": "harness",
                        "CPU_GATE_REPEATS": "--repeats 2 --max-repeats 2 --judge disk,structure",
                        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}  # fmt: skip
    proc = subprocess.run(
        ["bash", ".ci/cpu-gate", "pr", f"{repo.path}@{repo.bad}", f"{repo.path}@{repo.neutral}", str(scenario)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = (results / "compare.txt").read_text().splitlines()
    assert lines[0].startswith(f"note: the pair: base {repo.bad} ") and f"merge base {repo.release[:12]}" in lines[0]
    assert lines[-1] == "compare: 1 ok -> PASS"
    assert "the pair: base" in (tmp_path / "summary.md").read_text()


# -- what one job runs fits its timeout-minutes ----------------------------------------------------------------------
# What runs before the main step, allowed per runner (checkouts, Pythons, caches, .ci/setup; on verl's Ascend runners
# the harness into the image's Python and gsm8k): allowances, not measurements
SETUP_MIN = {"hosted": 10, "ascend": 5, "cuda": 8}
MINUTES = re.compile(r"-m harness\.job run (?:(?!--no-verdict)[^\n])*?--minutes (\d+)")


def _limit(path: Path, cap: float) -> float:
    return min(load_scenario(path).executor.timeout_s, cap)


def _compare_s(paths: list[Path], repeats: int, cap: float) -> float:
    """At most, what base against head trains (``Session.compare``): base --repeats times and
    head once where overhead is not decided; else ABBA pairs, and while INCONCLUSIVE one more pair only when it would
    end within the default budget by the pairs so far (at most one pair past it)."""
    total = 0.0
    for path in paths:
        t = 2 * _limit(path, cap)  # off and on
        if "overhead" in families(load_scenario(path), FAMILIES):
            total += max(2 * repeats * t, ComparePolicy.budget_s + 2 * t)
        else:
            total += len(structure_order(repeats)) * t
    return total


def _job_trains_s(name: str, job_name: str, job: dict) -> float | None:
    """What one job's main step trains at most, with the inputs its callers document; None: no static bound (the
    bisect: probes of whole comparisons, bounded by the step's minutes alone)."""
    cap = float(job.get("env", {}).get("HARNESS_MAX_TRAINING_S", "inf"))
    if name == "verl-cpu-gate.yml":
        listed = re.search(r"PR_SCENARIOS=\(([^)]*)\)", (ROOT / ".ci" / "cpu-gate").read_text())[1]  # type: ignore[index]
        return _compare_s([ROOT / p for p in listed.split()], 2, cap)  # compare's default --repeats
    if name == "verl-compare.yml":
        gate = _load(ROOT / "docs" / "verl-caller-example.yml")["jobs"]["ascend-gate"]["with"]
        return _compare_s(sorted(ROOT.glob(gate["scenarios"])), gate["repeats"], cap)
    if name == "nightly-cpu.yml" and job_name == "nightly":
        nightly = [p for p in sorted((ROOT / "scenarios").glob("*.yaml")) if p.name.startswith(("tiny_", "real_"))
                   and not p.name.startswith("tiny_cuda_")]  # fmt: skip
        duet = re.search(r"DUET_SCENARIOS:-([^}]*)}", (ROOT / ".ci" / "cpu-gate").read_text())[1]  # type: ignore[index]
        return sum(2 * _limit(p, cap) for p in nightly) + _compare_s([ROOT / p for p in duet.split()], 2, cap)
    if name in ("nightly-ascend.yml", "nightly-cuda.yml") and job_name == "nightly":
        inputs = _inputs(name)
        runs = inputs.get("calibrate-runs", {}).get("default", 1)
        return max(runs * 2 * _limit(ROOT / "scenarios" / f"{s}.yaml", cap)
                   for s in json.loads(inputs["scenarios"]["default"]))  # fmt: skip  # one scenario a job
    if job_name in ("history", "notify"):  # no training
        return 0.0
    return None


def test_what_one_job_runs_fits_its_timeout_minutes():
    """For every job of every reusable workflow with the inputs its callers document: the set-up and the main step's
    minutes fit the job's timeout-minutes, and the step's trainings (sides x runs x (off + on) x each training's limit:
    its scenario's executor.timeout_s, capped by the job's HARNESS_MAX_TRAINING_S) and the reports' reserve fit the
    step's minutes, which the harness holds every training to (HARNESS_DEADLINE). The old Ascend gate: 2 x 1 x 2 x 30
    min of qwen2_0_5b_fsdp_l0's timeout in a 40-minute job, cancelled by GitHub before the harness could say why."""
    checked = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        if path.name in ("ci.yml", "pr-gate.yml"):  # the harness's own tests; pr-gate.yml only calls the gates
            continue
        for job_name, job in _load(path)["jobs"].items():
            mains = [s for s in job.get("steps", []) if MINUTES.search(s.get("run", ""))]
            assert len(mains) == 1, f"{path.name}:{job_name}: one main step with --minutes, got {len(mains)}"
            (main_step,) = mains
            minutes = int(MINUTES.search(main_step["run"])[1])  # type: ignore[index]
            assert main_step.get("timeout-minutes") == minutes, f"{path.name}:{job_name}: the step's own limit"
            hosted = job["runs-on"] == "ubuntu-latest"
            runner = "hosted" if hosted else "cuda" if path.name == "nightly-cuda.yml" else "ascend"
            assert SETUP_MIN[runner] + minutes <= job["timeout-minutes"], (path.name, job_name, minutes)
            trains = _job_trains_s(path.name, job_name, job)
            if trains is not None:
                assert trains + REPORT_RESERVE_S <= minutes * 60, (path.name, job_name, trains / 60, minutes)
            checked.append((path.name, job_name, trains))
    assert {(n, j) for n, j, _ in checked} >= {("verl-cpu-gate.yml", "cpu-gate"), ("verl-compare.yml", "compare"),
        ("nightly-ascend.yml", "nightly"), ("nightly-cpu.yml", "nightly"), ("nightly-cuda.yml", "nightly")}  # fmt: skip


def test_a_training_is_held_to_the_jobs_cap_and_to_what_is_left_of_it(monkeypatch):
    monkeypatch.delenv(config.MAX_TRAINING_S.name, raising=False)
    monkeypatch.delenv(config.DEADLINE.name, raising=False)
    assert training_limit(900.0) == (900.0, "executor.timeout_s")
    monkeypatch.setenv(config.MAX_TRAINING_S.name, "300")
    assert training_limit(900.0)[0] == 300.0 and training_limit(60.0)[0] == 60.0
    monkeypatch.setenv(config.DEADLINE.name, str(1000 + REPORT_RESERVE_S + 200))
    assert training_limit(900.0, now=1000) == (200.0, "HARNESS_DEADLINE, what is left of the job")
    monkeypatch.setenv(config.DEADLINE.name, str(1000 + REPORT_RESERVE_S + 10))
    with pytest.raises(InfraError, match="the job's time is spent"):
        training_limit(900.0, now=1000)
    monkeypatch.setenv(config.MAX_TRAINING_S.name, "soon")
    with pytest.raises(InfraError, match="HARNESS_MAX_TRAINING_S='soon': expected a positive number of seconds"):
        training_limit(900.0)


@pytest.mark.integration
@pytest.mark.trains
def test_a_training_past_the_jobs_cap_is_stopped_and_named_not_a_verdict(tmp_path, cache):
    scenario = write_scenario(tmp_path, name="capped", **SMALL_TARGET)
    env = os.environ | {"HARNESS_CACHE_DIR": str(cache), config.MAX_TRAINING_S.name: "2"}
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--results", str(tmp_path / "r")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = proc.stdout + proc.stderr
    assert "timed out after 2s (HARNESS_MAX_TRAINING_S, the job's cap on a training); killed" in said, said[-2000:]


# -- history and baselines safe --------------------------------------------------------------------------------------
FAKE_GITHUB = """
const find = require(process.argv[1]);
const runs = JSON.parse(process.argv[2]);
const out = {};
const github = {
  rest: {
    repos: {get: async () => ({data: {default_branch: 'main'}})},
    actions: {
      listWorkflowRuns: async (q) => {
        if (runs.fail) { throw Object.assign(new Error(runs.fail.message), {status: runs.fail.status}); }
        return {data: runs.filter((r) => r.workflow === q.workflow_id)};
      },
      listWorkflowRunArtifacts: async (q) => ({data: {artifacts: runs.find((r) => r.id === q.run_id).artifacts
        .filter((a) => a.name === q.name)}}),
    },
  },
  paginate: {iterator: async function* (fn, q) { yield await fn(q); }},
};
const core = {setOutput: (k, v) => { out[k] = v; }, info: () => {}, warning: (w) => { out.warning = w; },
              setFailed: (m) => { out.failed = m; }};
const context = {repo: {owner: 'verl-project', repo: 'verl'}, runId: 99};
find({github, context, core}, 'precision-debugger-cpu-baseline-main-msprobe26.2.0',
     'verl-project/verl/.github/workflows/precision-debugger-nightly.yml@refs/heads/main')
  .then(() => console.log(JSON.stringify(out)), (err) => console.log(JSON.stringify({unhandled: err.message})));
"""
NAME = "precision-debugger-cpu-baseline-main-msprobe26.2.0"


def _run(id_: int, event: str = "schedule", branch: str = "main", repo: str = "verl-project/verl",
         workflow: str = "precision-debugger-nightly.yml", expired: bool = False) -> dict:  # fmt: skip
    return {"id": id_, "event": event, "head_branch": branch, "head_repository": {"full_name": repo},
            "path": f".github/workflows/{workflow}", "workflow": workflow, "created_at": "2026-12-0{id_ % 9}",
            "artifacts": [{"name": NAME, "expired": expired}]}  # fmt: skip


def _previous(runs: list[dict] | dict) -> dict:
    node = shutil.which("node")
    assert node, "node is missing (.ci/run installs Debian's nodejs): the nightlies' baseline finder runs in node"
    proc = subprocess.run([node, "-e", FAKE_GITHUB, str(ROOT / ".ci" / "previous-baseline.js"), json.dumps(runs)],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return json.loads(proc.stdout)


def test_the_last_good_baseline_comes_from_this_workflows_own_runs_on_the_default_branch():
    """Newest first, as the API lists them: a fork's pull request, a pull request from a branch, a push, another
    branch's dispatch and another workflow all uploaded an artifact of the series' name (the old finder took the
    newest such artifact of the whole repository); an expired one and this very run are passed over; the scheduled
    run on main is the baseline, a dispatch on main (accept-baseline) too."""
    decoys = [_run(9, "pull_request", "fix", repo="someone/verl"), _run(8, "pull_request", "fix"), _run(7, "push"),
              _run(6, "workflow_dispatch", "feature"), _run(5, workflow="other.yml"),
              _run(4, expired=True)]  # fmt: skip
    assert _previous([*decoys, _run(3), _run(2)]) == {"run-id": "3"}
    assert _previous([*decoys, _run(3, "workflow_dispatch"), _run(2)]) == {"run-id": "3"}
    assert _previous([_run(99), *decoys]) == {
        "warning": f"no previous {NAME} among this workflow's scheduled or dispatched runs on main: this night starts "
        "the series"
    }


@pytest.mark.parametrize("status, message, what", [
    (500, "Server Error", "re-run the workflow"),
    (403, "Resource not accessible by integration", "grant it actions: read"),
    (401, "Bad credentials", "grant it actions: read"),  # no token at all: a missing secret
])  # fmt: skip
def test_the_api_failing_while_the_last_good_baseline_is_looked_up_is_one_line_never_an_ungated_night(
    status, message, what
):
    """The runs' listing answered 500, 403 (a token without actions: read) or 401 (no token): the step fails in one
    line naming the API and what to do, not a verdict on verl; the night never starts its series ungated (it did:
    an unhandled Octokit error, no line of the harness's own)."""
    out = _previous({"fail": {"status": status, "message": message}})  # type: ignore[arg-type]
    assert set(out) == {"failed"}, out
    assert out["failed"].startswith(f"precision_debugger nightly: the last good baseline {NAME} could not be looked up "
                                    f"(HTTP {status}: {message}): not a verdict on verl; "), out  # fmt: skip
    assert what in out["failed"] and "\n" not in out["failed"]


def test_one_writer_of_the_history_branch_a_baseline_kept_while_nights_regress_and_hashed_requirements():
    """Both nightlies' history jobs share one concurrency group (they pushed one branch from two groups: the loser of
    the race went red), never run after a cancelled night, and set up from hashed wheels only (they installed an
    unhashed lock and upgraded pip). Each night that does not publish its baseline uploads the last good one again,
    so it never expires while nights regress; the previous one is found by .ci/previous-baseline.js."""
    groups = set()
    for name in ("nightly-cpu.yml", "nightly-ascend.yml"):
        jobs = _load(WORKFLOWS / name)["jobs"]
        history = jobs["history"]
        groups.add(history["concurrency"]["group"])
        assert history["if"].startswith("${{ !cancelled() && ")
        runs = " ".join(s.get("run", "") for s in history["steps"])
        assert "-- bash .ci/setup --history" in runs and "--locked" not in runs
        steps = jobs["nightly"]["steps"]
        finder = next(s for s in steps if s.get("id") == "previous")
        assert "require('./.ci/previous-baseline.js')" in finder["with"]["script"]
        # the runner's GITHUB_WORKFLOW_REF (github.workflow_ref, the calling workflow's file where a reusable one runs)
        assert "process.env.GITHUB_WORKFLOW_REF" in finder["with"]["script"]
        assert "WORKFLOW_REF" not in finder.get("env", {})
        uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
        named = {s["if"]: s["with"]["path"] for s in uploads if str(s["with"].get("retention-days")) == "90"}
        night = "nightly" if name == "nightly-cpu.yml" else "night"
        assert set(named) == {f"always() && steps.{night}.outputs.baseline == 'publish'",
                              f"always() && steps.{night}.outputs.baseline != 'publish' && "
                              "hashFiles('baseline-prev/baseline.json') != ''"}, named  # fmt: skip
    assert len(groups) == 1
    lock = (ROOT / ".ci" / "history.lock").read_text().splitlines()
    pins = [ln for ln in lock if ln and not ln.startswith(("#", "-"))]
    assert pins and all(re.fullmatch(r"\S+==\S+ --hash=sha256:[0-9a-f]{64}", ln) for ln in pins)
    cpu = {name.lower(): version for name, version in
           re.findall(r"^([A-Za-z0-9][^ =]*)==([^ \\]+)", (ROOT / ".ci" / "cpu.lock").read_text(), re.M)}  # fmt: skip
    for ln in pins:
        name, version = ln.split(" ")[0].split("==")
        assert cpu.get(name.lower(), version) == version, ln  # the versions of .ci/cpu.lock
    setup = (ROOT / ".ci" / "setup").read_text()
    assert "--require-hashes --no-deps -r .ci/history.lock" in setup


def test_a_night_records_the_machine_that_trained_not_the_one_appending(tmp_path, monkeypatch):
    from gate_builders import ENV, write_results

    from harness.history.night import night_of

    write_results(tmp_path / "night", env=ENV | {"runner": "linux-aarch64-a2b3-8-runner-3"})
    monkeypatch.setenv("RUNNER_NAME", "GitHub Actions 1000")  # the history job's hosted runner
    assert night_of(tmp_path / "night", date="2026-12-05").identity.runner == "linux-aarch64-a2b3-8-runner-3"


# -- every finding ends with the command that reproduces it ---------------------------------------------------------
def test_every_finding_ends_with_the_command_that_reproduces_it_everywhere(tmp_path, monkeypatch):
    """A regression against the last good night (the nightly's gate): the annotation, the console's lines, the step
    summary and the nightly's report each end the scenario's findings with the same command, base against head from
    verl's public repository at the two nights' commits (a CI job's checkout is a local path: HARNESS_VERL_URL)."""
    from gate_builders import ENV, write_results

    from harness.gate.against_baseline import gate_dirs
    from harness.gate.baseline import Baseline, build
    from harness.gate.observe import observe_dir
    from harness.report.github import annotation_lines, summary
    from harness.report.summary import details

    good, bad = "a" * 40, "b" * 40
    monkeypatch.setenv(config.VERL_URL.name, "https://github.com/verl-project/verl")
    for i in range(2):
        write_results(tmp_path / f"cal{i}", env=ENV | {"verl_commit": good, "verl_source": ".verl/nightly"})
    build([tmp_path / "cal0", tmp_path / "cal1"], calibrate=True).write(tmp_path / "baseline.json")
    write_results(tmp_path / "now", disk=2_000_000, env=ENV | {"verl_commit": bad, "verl_source": ".verl/nightly"})
    baseline = Baseline.read(tmp_path / "baseline.json")
    judgement = gate_dirs(baseline, [tmp_path / "now"])
    command = ("python -m harness compare scenarios/tiny_case.yaml --base https://github.com/verl-project/verl@"
               f"{good[:12]} --head https://github.com/verl-project/verl@{bad[:12]}")  # fmt: skip
    assert f"  reproduce tiny_case: {command}" in verdicts.lines(judgement)  # the terminal
    doc = verdicts.gate_doc(judgement, baseline, observe_dir(tmp_path / "now"), [tmp_path / "now"])
    findings = [ln for ln in annotation_lines(doc) if "title=REGRESSED tiny_case" in ln]
    assert findings and all(ln.endswith(f"; reproduce: {command}") for ln in findings)
    report = "\n".join(details(observe_dir(tmp_path / "now"), doc))  # the nightly's summary.md
    assert f"- reproduce tiny_case: `{command}`" in report.splitlines()
    assert command in summary(doc, report)
    monkeypatch.delenv(config.VERL_URL.name)
    assert reproducible(good, "/home/me/src/verl") == f"/home/me/src/verl@{good[:12]}"
    assert reproducible(None, None, "0.9.1") == "0.9.1"


def test_the_nightly_callers_dispatch_accepts_a_baseline():
    """Three places said "rerun with accept-baseline", which the nightly caller's dispatch did not have."""
    caller = _load(ROOT / "docs" / "verl-nightly-caller-example.yml")
    accept = caller[True]["workflow_dispatch"]["inputs"]["accept-baseline"]
    assert accept["type"] == "boolean" and accept["default"] is False
    for job in ("nightly", "cpu-nightly"):
        assert caller["jobs"][job]["with"]["accept-baseline"] == "${{ inputs.accept-baseline == true }}"
    for name in ("nightly-cpu.yml", "nightly-ascend.yml"):
        assert "accept-baseline" in _inputs(name)
