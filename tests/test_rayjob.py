"""The rayjob executor (verl's RayJob submitter) without a cluster: its protocol read from verl's own multi-node
nightly (a copy in tests/data/verl_multinode, with the verl commit it came from), then the executor against a fake
submitter service on 127.0.0.1 serving each way a job ends, each mapped to its verdict class and exit code, the
training's job DELETEd every time; and the bad input: a shared cache that is full or read-only. What verl's runners
add (a verl crash after a long log, the shared cache, the DELETE's scope, the watch's ends, the job's checks of what
it reads): tests/test_ray_multinode.py."""

from __future__ import annotations

import _thread
import contextlib
import errno
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from fake_servers import CUT, RUNNING, STARTED, Service, drip, elsewhere, ev, redirect_to, serving
from pydantic import ValidationError

from harness.artifacts.crash import classify
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import ScenarioDir
from harness.errors import HarnessError, InfraError
from harness.outcomes import EXIT_ERROR, EXIT_FAIL, EXIT_PASS
from harness.safeio import validation_line
from harness.scenario.loader import load_scenario
from harness.scenario.settings.rayjob import RayJobRuntime
from harness.targets.spec import Package
from harness.training.devices import cluster_missing
from harness.training.executors import rayjob, rayjob_files
from harness.training.executors.ray_cluster import RUN_ENV
from harness.training.launch import Launch, NodeRun

ROOT = Path(__file__).resolve().parents[1]
VERL_NIGHTLY = ROOT / "tests" / "data" / "verl_multinode" / "nightly_ascend_multinode.yml"
SCENARIO = ROOT / "scenarios" / "qwen2_0_5b_fsdp_multinode.yaml"
RUN_ID = "4242"

# --- verl's protocol, read from its own workflow --------------------------------------------------------------------


def verl_script() -> str:
    """verl's submit_and_wait_rayjob.sh, as its workflow writes it (the heredoc of 'Prepare RayJob submit helper')."""
    doc = yaml.safe_load(VERL_NIGHTLY.read_text())
    (step,) = [s for s in doc["jobs"]["ascend-rayjob-e2e"]["steps"] if s.get("name") == "Prepare RayJob submit helper"]
    return str(step["run"]).split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]


def case_arms(script: str, subject: str) -> list[str]:
    """The labels of the bash ``case "${subject}" in ... esac`` in ``script``."""
    body = script.split(f'case "${{{subject}}}" in', 1)[1].split("esac", 1)[0]
    return [w for arm in re.findall(r"^\s*([A-Z_a-z|*]+)\)", body, re.M) for w in arm.split("|") if w != "*"]


def test_the_copy_of_verls_nightly_names_the_commit_it_came_from():
    header = VERL_NIGHTLY.read_text().split("\nname:", 1)[0]
    assert re.search(r"verl-project/verl\s.*\n?.*at commit [0-9a-f]{40}", header), header


def test_the_payload_the_harness_posts_has_exactly_verls_keys():
    script = verl_script()
    template = re.search(r"'\{(repository:[^']*)\}'", script)
    assert template, "verl's jq payload template not found"
    verl_keys = re.findall(r"(\w+):", template[1])
    assert list(rayjob.PAYLOAD_KEYS) == verl_keys
    node = NodeRun.new("/tmp/harness-ray", "s", "on", 2, 8, "NPU", "python3")
    launch = Launch(module="m", args=[], env={"A": "1"}, workdir=Path("/w"), node=node)
    body = rayjob.payload(launch, RayJobRuntime(), node, None)
    assert list(body) == verl_keys
    # the types verl's jq gives them: args and template_patches arrays, env an object, worker_replicas a number
    assert isinstance(body["args"], list) and isinstance(body["template_patches"], list)
    assert isinstance(body["env"], dict) and isinstance(body["worker_replicas"], int)
    assert all(isinstance(body[k], str) for k in verl_keys if k not in ("args", "env", "template_patches",
                                                                         "worker_replicas"))  # fmt: skip


def test_the_events_and_final_statuses_the_harness_parses_are_verls():
    script = verl_script()
    assert case_arms(script, "type") == list(rayjob.EVENT_KINDS)
    assert case_arms(script, "final_status") == list(rayjob.FINAL_STATUSES)
    # the fields verl reads of each event, the harness's log lines read the same
    for field in ("line", "status", "message", "rayjob_status", "job_deployment_status"):
        assert f".{field} //" in script and field in Path(rayjob.__file__).read_text()
    assert "job_id" in script and ".job_id // empty" in script


def test_the_paths_are_verls():
    text = VERL_NIGHTLY.read_text()
    assert '"${SUBMITTER_URL}' + rayjob.SUBMIT_PATH + '"' in text
    assert rayjob.WATCH_PATH.replace("{job_id}", "${job_id}") + "?format=ndjson" in text
    assert rayjob.DELETE_PATH.replace("{run}", "${GITHUB_RUN_ID}") + "?attempt=${GITHUB_RUN_ATTEMPT:-1}" in text
    assert "--retry 5" in text and "--retry-delay 10" in text
    defaults = RayJobRuntime()
    assert (defaults.watch_retries, defaults.retry_delay_s) == (5, 10)
    doc = yaml.safe_load(text)
    assert defaults.image == doc["env"]["IMAGE"] and defaults.worker_replicas == int(doc["env"]["WORKER_REPLICAS"])


def test_the_scenario_validates_and_is_skipped_here_saying_why(monkeypatch):
    monkeypatch.delenv("SUBMITTER_URL", raising=False)
    scenario = load_scenario(SCENARIO)
    assert scenario.executor.kind == "rayjob" and scenario.workload.nnodes == 2
    why = cluster_missing(scenario)
    assert why and "\n" not in why and "SUBMITTER_URL" in why and "dry-run" in why
    monkeypatch.setenv("SUBMITTER_URL", "http://rayjob-submitter.ci-system.svc.cluster.local")
    assert cluster_missing(scenario) is None


def test_the_job_script_sets_the_nodes_up_then_runs_and_gathers_in_the_shared_cache(tmp_path):
    rt, node, launch, run = setup_run(tmp_path, "http://127.0.0.1:9")
    script = rayjob_files.job_script(launch, run, rt, node, {})
    lines = [ln.strip() for ln in script.splitlines()]
    setup = next(i for i, ln in enumerate(lines) if ".ray_entry setup " in ln)
    started = lines.index(f"echo '{rayjob_files.STARTED}'")
    entry = next(i for i, ln in enumerate(lines) if ".ray_entry run " in ln)
    assert setup < started < entry
    assert f"--run {run.root}" in lines[entry] and f"--node-root {node.root}" in lines[entry]
    assert "--nodes 2 --resource NPU" in lines[setup] and '--bundle "$here/bundle.tar"' in lines[setup]
    assert str(run.root).startswith(rt.cache)


# --- a fake submitter service on loopback ---------------------------------------------------------------------------

SITE = "/usr/local/lib/python3.11/site-packages/verl"
TRACEBACK = f"""Traceback (most recent call last):
  File "{SITE}/trainer/main_ppo.py", line 42, in main
    run_ppo(config)
  File "{SITE}/utils/profiler/precision_debugger_profile.py", line 176, in _should_collect
    raise ValueError("Unknown precision_debugger stage: train_batch")
ValueError: Unknown precision_debugger stage: train_batch"""


@pytest.fixture
def service():
    with contextlib.ExitStack() as stack:

        def make(post: Any = (200, '{"job_id": "rayjob-1"}'), watches: Any = None, **kw: Any) -> Service:
            return stack.enter_context(serving(post, watches, **kw))

        yield make


PINNED = Package(name="verl", kind="pinned", version="0.9.1")


def setup_run(
    tmp_path: Path, url: str, verl: Package | None = PINNED, **block: Any
) -> tuple[RayJobRuntime, NodeRun, Launch, Any]:
    """The rayjob block (on ``url``), a training's node run, its launch (the verl under test ``verl``) and its run dir
    in the shared cache ``tmp_path/cache``."""
    cache = Path(block.pop("cache", tmp_path / "cache"))
    rt = RayJobRuntime(url=url, cache=str(cache), retry_delay_s=0, watch_retries=2, **block)
    node = NodeRun.new("/tmp/harness-ray", "s", "on", 2, 8, "NPU", "python3")
    launch = Launch(module="verl.trainer.main_ppo", args=["trainer.nnodes=2"], env={"A": "1"}, workdir=tmp_path,
                    inputs=[Path("/models/q")], node=node, verl=verl)  # fmt: skip
    run = ScenarioDir(cache / "results" / tmp_path.name / "s").run("on")
    run.root.mkdir(parents=True)
    return rt, node, launch, run


def execute(tmp_path: Path, srv: Service, timeout_s: float = 60, stop: threading.Event | None = None, **block: Any):
    rt, _, launch, run = setup_run(tmp_path, srv.url, **block)
    (Path(rt.cache) / "results").mkdir(parents=True, exist_ok=True)
    settings = SimpleNamespace(timeout_s=timeout_s, options=lambda kind: rt)
    result = rayjob.RayJobSubmitterExecutor().execute(launch, run, settings, {}, stop)  # type: ignore[arg-type]
    return result, run


def outcome(tmp_path: Path, srv: Service, **kw: Any) -> tuple[str, int, str]:
    """(verdict class, exit code, the line) as the harness reports a run that ended so."""
    try:
        res, run = execute(tmp_path, srv, **kw)
    except HarnessError as exc:  # RemoteError: an InfraError of a server
        return "InfraError" if isinstance(exc, InfraError) else type(exc).__name__, EXIT_ERROR, str(exc)
    assert isinstance(res, ExecResult)
    crash = classify(res, run.log, kw.get("timeout_s", 60))
    if crash is None:
        return "passed", EXIT_PASS, ""
    return crash.party, EXIT_FAIL if crash.verdict else EXIT_ERROR, crash.reason


@pytest.fixture(autouse=True)
def _run_id(monkeypatch):
    monkeypatch.setenv("GITHUB_RUN_ID", RUN_ID)
    monkeypatch.delenv("SUBMITTER_URL", raising=False)
    monkeypatch.setattr(rayjob, "TICK_S", 0.05)


DELETE = re.compile(rf"/api/v1/workflows/{RUN_ID}-[0-9a-f]{{6}}\?attempt=1")


def deleted(srv: Service) -> bool:
    """The training's job was DELETEd under its own run id, and nothing POSTed is left at the submitter."""
    return bool(srv.deleted()) and all(DELETE.fullmatch(p) for p in srv.deleted()) and srv.alive() == []


def left_in_cache(tmp_path: Path) -> list[str]:
    """What the trainings left of theirs in the shared cache."""
    root = tmp_path / "cache" / rayjob_files.HARNESS_DIR
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_a_job_that_succeeds_is_a_pass_and_the_payload_is_what_dry_run_shows(tmp_path, service):
    srv = service()
    assert outcome(tmp_path, srv) == ("passed", EXIT_PASS, "")
    assert srv.requests[0] == ("POST", "/api/v1/rayjobs")
    assert srv.requests[1] == ("GET", "/api/v1/rayjobs/rayjob-1/watch?format=ndjson")
    assert deleted(srv)
    (body,) = srv.payloads
    assert list(body) == list(rayjob.PAYLOAD_KEYS) and re.fullmatch(rf"{RUN_ID}-[0-9a-f]{{6}}", body["github_run_id"])
    assert body["env"] == {}  # as verl's nightly sends it: the job reads its variables from the file it checks
    assert re.fullmatch(rf"{tmp_path}/cache/verl-msprobe-harness/harness-s-on-[0-9a-f]{{8}}/job\.sh", body["script"])
    assert left_in_cache(tmp_path) == []  # the training's files go with it


def test_a_training_that_fails_in_verl_is_a_verdict_on_verl(tmp_path, service):
    log = [ev("log", line=ln) for ln in TRACEBACK.splitlines()]
    srv = service(watches=[[STARTED, RUNNING, *log, ev("final", status="FAILED", message="job failed")]])
    party, code, line = outcome(tmp_path, srv)
    assert (party, code) == ("verl", EXIT_FAIL) and "Unknown precision_debugger stage" in line
    assert deleted(srv)


@pytest.mark.parametrize(
    ("post", "watches", "line"),
    [
        ((200, "<html>502 Bad Gateway</html>"), None, r":\d+ answered HTTP 200 with no JSON: <html>502"),
        ((503, '{"detail": "quota exceeded"}'), None, r"refused the job: HTTP 503: quota exceeded"),
        ((200, '{"id": "x"}'), None, r"without a job_id"),
        (None, [[STARTED, ev("final", status="TIMEOUT", message="deadline")]], r"ended TIMEOUT at the submitter"),
        (None, [[ev("final", status="NOT_FOUND")]], r"ended NOT_FOUND at the submitter: the job or its cluster"),
        (None, [[ev("error", message="pod evicted"), ev("final", status="FAILED")]], r"FAILED before its training"),
        (None, [[STARTED, RUNNING, CUT], [CUT]], r"watch of RayJob rayjob-1 was lost .*broke off.* \(tried 3 times"),
        (None, [[STARTED, RUNNING]], r"watch of RayJob rayjob-1 was lost .*: the watch ended without a final event"),
        (None, [[STARTED, "HARNESS RAY ERROR: node 10.0.0.3 (w): /models/q is absent"]], None),
    ],
    ids=["non-json", "non-2xx", "no-job-id", "timeout", "not-found", "failed-before-start", "watch-lost", "watch-ended",
         "entry"],
)
def test_the_submitters_and_the_jobs_failures_are_infrastructure_in_one_line(tmp_path, service, post, watches, line):
    if line is None:  # the job's own entrypoint failed: its line, as the ray executor says it
        watches = [[STARTED, ev("log", line="HARNESS RAY ERROR: node 10.0.0.3 (w): /models/q is absent"),
                    ev("final", status="FAILED")]]  # fmt: skip
        line = r"RayJob rayjob-1: node 10\.0\.0\.3 \(w\): /models/q is absent"
    srv = service(**({"post": post} if post else {}), **({"watches": watches} if watches else {}))
    kind, code, text = outcome(tmp_path, srv)
    assert (kind, code) == ("InfraError", EXIT_ERROR), text
    assert re.search(line, text) and "\n" not in text
    assert srv.deleted() and srv.alive() == []  # every way out, a refused POST too
    assert left_in_cache(tmp_path) == []


def test_a_watch_that_drops_is_resumed(tmp_path, service):
    srv = service(watches=[[STARTED, RUNNING, CUT], [ev("log", line="step 2"), ev("final", status="SUCCEEDED")]])
    res, run = execute(tmp_path, srv)
    assert res.exit_code == 0 and srv.watched() == 2 and deleted(srv)
    text = run.log.read_text()
    assert "[rayjob status] status=RUNNING rayjob_status=RUNNING deployment_status=Running" in text
    assert text.index("step 2") < text.index("[rayjob final] SUCCEEDED")


def test_a_watch_that_never_ends_is_bounded_by_the_scenarios_timeout(tmp_path, service):
    srv = service(watches=[None])
    started = time.monotonic()
    party, code, line = outcome(tmp_path, srv, timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert (party, code) == ("infrastructure", EXIT_ERROR) and "timed out after 1s" in line
    assert deleted(srv)


def test_a_stop_and_ctrl_c_delete_the_runs_jobs(tmp_path, service):
    stop = threading.Event()
    srv = service(watches=[None])
    srv.on_watch = stop.set
    res, _ = execute(tmp_path / "stop", srv, stop=stop)
    assert res.stopped and deleted(srv)
    srv2 = service(watches=[None])
    srv2.on_watch = _thread.interrupt_main
    with pytest.raises(KeyboardInterrupt):
        execute(tmp_path / "int", srv2)
    assert deleted(srv2)


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "said"),
    [(errno.ENOSPC, "is full (No space left on device"), (errno.EROFS, "is read-only here (Read-only file system")],
)
def test_a_shared_cache_full_or_read_only_is_one_line_and_nothing_submitted(tmp_path, service, monkeypatch, code, said):
    srv = service()
    real = rayjob_files._open

    def refuse(path: Path, mode: int) -> Any:
        if path.name == rayjob_files.BUNDLE:
            raise OSError(code, os.strerror(code))
        return real(path, mode)

    monkeypatch.setattr(rayjob_files, "_open", refuse)
    kind, exit_code, line = outcome(tmp_path, srv)
    assert (kind, exit_code) == ("InfraError", EXIT_ERROR)
    assert f"the shared cache {tmp_path / 'cache'} {said}" in line and "\n" not in line
    assert srv.requests[:1] == [] or srv.requests[0][0] == "DELETE"  # nothing POSTed
    assert srv.alive() == [] and left_in_cache(tmp_path) == []


def test_a_results_dir_outside_the_shared_cache_is_refused(tmp_path, service):
    srv = service()
    rt, _, launch, _ = setup_run(tmp_path, srv.url)
    outside = ScenarioDir(tmp_path / "elsewhere").run("on")
    outside.root.mkdir(parents=True)
    settings = SimpleNamespace(timeout_s=60, options=lambda kind: rt)
    with pytest.raises(InfraError, match=r"is not under the shared cache .*: the RayJob's pods see only that"):
        rayjob.RayJobSubmitterExecutor().execute(launch, outside, settings, {})  # type: ignore[arg-type]
    assert srv.requests == []


# --- #82: a submitter that steers, stalls or forges; what a run leaves in the shared cache -----------------------


def bounded(call: Any, seconds: float) -> Any:
    """``call()`` in a thread, which must end within ``seconds`` (a hang fails the test, never stops it)."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"still running after {seconds:g} s"
    return out[0]


FORGED = "ok\n::error title=merged::all good, merge it"


@pytest.mark.parametrize(
    ("post", "watches"),
    [
        ((200, json.dumps({"job_id": FORGED})), None),
        ((503, json.dumps({"detail": FORGED})), None),
        ((503, "##[error]all good\n"), None),
        (None, [[STARTED, ev("final", status="TIMEOUT", message=FORGED)]]),
        (None, [[STARTED, ev("final", status=FORGED)]]),
        (None, [[STARTED, ev("log", line="HARNESS RAY ERROR: ##[error]all good"), ev("final", status="FAILED")]]),
    ],
    ids=["job-id", "refusal", "refusal-old-form", "final-message", "final-status", "entry-line"],
)
def test_a_submitters_text_is_one_escaped_line_never_a_workflow_command(tmp_path, service, post, watches):
    srv = service(**({"post": post} if post else {}), **({"watches": watches} if watches else {}))
    kind, code, line = outcome(tmp_path, srv)
    assert (kind, code) == ("InfraError", EXIT_ERROR), line
    assert "\n" not in line and "\r" not in line and "##[" not in line and not line.startswith("::"), line
    assert "all good" in line  # said, as data



def test_credentials_in_a_submitter_url_never_reach_the_error_itself(monkeypatch):
    """Masked where the line is made, not only where the command line prints it: pytest's report and JUnit XML
    carry the exception's text as it is."""
    monkeypatch.setenv("SUBMITTER_URL", "http://bob:pa55word@rayjob-submitter:80")
    with pytest.raises(InfraError) as err:
        rayjob.submitter_url(RayJobRuntime())
    line = str(err.value)
    assert "pa55word" not in line and "SUBMITTER_URL: 'http://***@rayjob-submitter:80' is not" in line
    with pytest.raises(ValidationError) as bad:  # the loader's line is the error's message
        RayJobRuntime(url="https://tok3n-a1b2c3d4@h")
    assert "https://***@h" in validation_line(bad.value) and "tok3n-a1b2c3d4" not in validation_line(bad.value)


def test_a_job_id_that_is_not_a_name_is_refused_before_it_is_watched(tmp_path, service):
    srv = service(post=(200, json.dumps({"job_id": "../../workflows/4242"})))
    kind, _, line = outcome(tmp_path, srv)
    assert kind == "InfraError" and "a job_id that is not a job's name: '../../workflows/4242'" in line
    assert srv.watched() == 0 and deleted(srv)


def test_a_redirect_to_another_host_is_never_followed_the_delete_never_sent_there(tmp_path, service, capsys):
    with elsewhere() as other:
        srv = service(delete=redirect_to(other.url))
        assert outcome(tmp_path, srv)[:2] == ("passed", EXIT_PASS)
        srv2 = service(post=redirect_to(other.url))
        kind, _, line = outcome(tmp_path / "post", srv2)
    assert other.heard == []
    assert kind == "InfraError" and "POST /api/v1/rayjobs was redirected to another host" in line
    err = capsys.readouterr().err
    assert re.search(rf"DELETE of RayJob run {RUN_ID}-[0-9a-f]{{6}} at {srv.url} failed: ", err)
    assert re.search(r"DELETE /api/v1/workflows/4242-[0-9a-f]{6} was redirected to another host .*: not followed", err)


def test_a_submitter_that_drips_holds_neither_the_post_nor_the_delete_past_its_bound(tmp_path, service, monkeypatch):
    srv = service(post=drip)
    started = time.monotonic()
    kind, _, line = bounded(lambda: outcome(tmp_path, srv, timeout_s=2), 20)
    assert time.monotonic() - started < 8
    assert kind == "InfraError" and "POST /api/v1/rayjobs not answered within 2 s" in line
    monkeypatch.setattr(rayjob, "DELETE_BUDGET_S", 1.0)
    srv2 = service(delete=drip)
    started = time.monotonic()
    assert bounded(lambda: outcome(tmp_path / "delete", srv2), 20)[:2] == ("passed", EXIT_PASS)
    assert time.monotonic() - started < 8


@pytest.mark.parametrize(
    "event",
    [
        "[1, 2]", "5", "null", '"a string"', '{"type": 5}', '{"type": ["final"]}', '{"type": "log", "line": {"a": 1}}',
        '{"type": "log", "line": "\\ud800"}', '{"type": "status", "status": [1], "message": {"m": 1}}',
        '{"type": "error", "message": 7}', '{"type": "raw"}',
    ],
)  # fmt: skip
def test_a_watch_event_of_any_shape_is_logged_never_a_crash(tmp_path, service, event):
    srv = service(watches=[[STARTED, event, ev("final", status="SUCCEEDED")]])
    assert outcome(tmp_path, srv) == ("passed", EXIT_PASS, "")


@pytest.mark.parametrize("status", [5, ["SUCCEEDED"], {"s": "SUCCEEDED"}, None, True])
def test_a_final_status_that_is_not_a_string_is_the_infrastructures_in_one_line(tmp_path, service, status):
    srv = service(watches=[[STARTED, json.dumps({"type": "final", "status": status})]])
    kind, code, line = outcome(tmp_path, srv)
    assert (kind, code) == ("InfraError", EXIT_ERROR) and "\n" not in line
    assert re.search(r"RayJob rayjob-1 ended '.*', not one of verl's SUCCEEDED, FAILED, TIMEOUT, NOT_FOUND$", line)


def test_a_job_that_succeeds_having_gathered_nothing_is_the_infrastructures_not_verls(tmp_path, service):
    srv = service(gathers=False)
    kind, code, line = outcome(tmp_path, srv)
    assert (kind, code) == ("InfraError", EXIT_ERROR)
    assert line.startswith("RayJob rayjob-1 ended SUCCEEDED with nothing gathered (no nodes.json in the run dir")


def test_the_runs_log_is_never_written_through_a_link_the_job_left(tmp_path, service):
    srv = service()
    rt, _, launch, run = setup_run(tmp_path, srv.url)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    run.log.symlink_to(outside)
    settings = SimpleNamespace(timeout_s=60, options=lambda kind: rt)
    with pytest.raises(HarnessError, match=r"train\.log: a symbolic link: files are written in place, never through"):
        rayjob.RayJobSubmitterExecutor().execute(launch, run, settings, {})  # type: ignore[arg-type]
    assert outside.read_text() == "keep me" and deleted(srv)


def test_a_run_leaves_nothing_in_the_shared_cache(tmp_path, service):
    srv = service()
    assert outcome(tmp_path, srv)[1] == EXIT_PASS
    assert left_in_cache(tmp_path) == [] and (tmp_path / "cache" / rayjob_files.HARNESS_DIR).is_dir()


# --- the reusable workflow and its caller, against verl's multi-node job -------------------------------------------

WORKFLOW = ROOT / ".github" / "workflows" / "verl-multinode.yml"
CALLER = ROOT / "docs" / "verl-multinode-caller-example.yml"


def test_the_workflow_runs_where_and_as_verls_multinode_job_does():
    verl = yaml.safe_load(VERL_NIGHTLY.read_text())
    verl_job = verl["jobs"]["ascend-rayjob-e2e"]
    ours = yaml.safe_load(WORKFLOW.read_text())
    inputs = ours[True]["workflow_call"]["inputs"]  # yaml reads `on:` as True
    assert inputs["runner-labels"]["default"] == json.dumps([verl_job["runs-on"]])
    assert inputs["image"]["default"] == verl_job["container"]["image"] == verl["env"]["IMAGE"]
    assert inputs["submitter-url"]["default"] == verl["env"]["SUBMITTER_URL"]
    network = next(s for s in verl_job["steps"] if s.get("name") == "Setup and Verify Cluster Network")["run"]
    assert f"nameserver {inputs['cluster-dns']['default']}" in network
    (job,) = ours["jobs"].values()
    assert job["timeout-minutes"] == verl_job["timeout-minutes"] == 240
    assert job["strategy"]["max-parallel"] == 1  # one RayJob of two whole nodes at a time
    # the action majors verl's multi-node job runs (checkout v4), pinned by commit; node20 majors only in its image
    assert {s["uses"] for s in verl_job["steps"] if "uses" in s} == {"actions/checkout@v4"}
    for step in job["steps"]:
        if "uses" in step:
            action = step["uses"].split(" ")[0]
            assert re.fullmatch(r"actions/(checkout|upload-artifact)@[0-9a-f]{40}", action), action
    text = WORKFLOW.read_text()
    assert re.search(r"actions/checkout@[0-9a-f]{40} # v4\.", text)
    # verl's clean-up runs on always(); ours DELETEs the run ids its harness POSTed (verl's DELETEs GITHUB_RUN_ID's
    # every RayJob: run beside verl's own jobs, it would delete them), after the results are kept
    verl_clean = next(s for s in verl_job["steps"] if s.get("name") == "Cleanup RayJobs")
    names = [s.get("name", "") for s in job["steps"]]
    our_clean = next(s for s in job["steps"] if "multinode-cleanup" in s.get("run", ""))
    assert our_clean["if"] == verl_clean["if"] == "always()" and "GITHUB_RUN_ID}?" not in our_clean["run"]
    assert names.index(our_clean["name"]) > names.index(next(n for n in names if n.startswith("Keep the results")))
    # the results dir lies in the shared cache the scenario's block names, in this job's own directory there: read
    # from the scenario by the job's own step, never a copy of its paths (test_the_jobs_paths_are_the_scenarios_...)
    assert not {"JOBDIR", "RESULTS", "GSM8K_DATA_DIR", "WHEELS"} & set(job["env"])
    assert any('multinode-paths "$SCENARIO"' in s.get("run", "") for s in job["steps"])
    # the workflow's image reaches the pods: verl's IMAGE, which the payload's image is
    assert ours["env"]["IMAGE"] == "${{ inputs.image }}"


@pytest.mark.integration
def test_the_jobs_paths_are_the_scenarios_shared_cache_and_wheels_dir(tmp_path):
    """JOBDIR (this job's own directory in the scenario's shared cache), the results dir and gsm8k's in it, and the
    wheels dir on the runner's disk, as the job's step writes them into its environment from the scenario's block."""
    env = {**os.environ, "GITHUB_ENV": str(tmp_path / "env"), "GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # fmt: skip
    done = subprocess.run(["bash", ".ci/ascend-job", "multinode-paths", SCENARIO.stem], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    block = load_scenario(SCENARIO).executor.options("rayjob")
    job = f"{block.cache}/{rayjob_files.HARNESS_DIR}/job-77-2-{SCENARIO.stem}"
    assert dict(ln.split("=", 1) for ln in (tmp_path / "env").read_text().splitlines()) == {
        "JOBDIR": job, "RESULTS": f"{job}/results", "GSM8K_DATA_DIR": f"{job}/data/gsm8k", "WHEELS": block.wheels_dir}
    assert job.startswith("/root/.cache/cicd_test/") and not block.wheels_dir.startswith("/root/.cache")


def test_the_caller_example_pins_the_workflow_and_runs_on_verls_repository_only():
    caller = yaml.safe_load(CALLER.read_text())
    (job,) = caller["jobs"].values()
    assert job["if"] == "github.repository_owner == 'verl-project'"
    uses, _, _ = job["uses"].partition(" ")
    assert re.fullmatch(r"verl-project/verl-msprobe-harness/\.github/workflows/verl-multinode\.yml@[0-9a-f]{40}", uses)
    assert job["with"]["harness-ref"] == uses.rsplit("@", 1)[1]


def test_the_payload_dry_run_shows_is_the_one_posted(tmp_path, service):
    srv = service()
    rt, _, launch, run = setup_run(tmp_path, srv.url)
    settings = SimpleNamespace(timeout_s=60, options=lambda kind: rt)
    lines = rayjob.RayJobSubmitterExecutor().describe(launch, run, settings, {})  # type: ignore[arg-type]
    start, end = lines.index("payload:") + 1, next(i for i, ln in enumerate(lines) if ln.startswith("job script "))
    shown = json.loads("\n".join(lines[start:end]))
    assert lines[0].startswith(f"RayJob of {launch.node.job} POSTed to {srv.url}/api/v1/rayjobs")  # type: ignore[union-attr]
    script = [ln.removeprefix("  ") for ln in lines[end + 1 :]]
    rayjob.RayJobSubmitterExecutor().execute(launch, run, settings, {})  # type: ignore[arg-type]
    (posted,) = srv.payloads
    assert {**posted, "args": shown["args"]} == shown and shown["args"] == [rayjob_files.UNMADE]
    assert posted["args"] == [hashlib.sha256(srv.scripts[0].encode()).hexdigest()]
    # the script shown is the one run but for the digests of what the dry run does not build
    real = [re.sub(r"[0-9a-f]{64}", "SHA", ln) for ln in srv.scripts[0].splitlines()]
    for name in (rayjob_files.ENV, rayjob_files.BUNDLE):
        script = [ln.replace(shlex.quote(f"{name}:{rayjob_files.UNMADE}"), f"{name}:SHA") for ln in script]
    assert real == script


# --- the job's side: the run's variables on every actor, every node set up -----------------------------------------


def test_the_runs_variables_reach_every_actor_through_rays_job_config(tmp_path, monkeypatch):
    from harness.training.executors import ray_entry

    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({RUN_ENV: "harness-s-on-1", "A": "1"}))
    monkeypatch.setenv(ray_entry.JOB_CONFIG, json.dumps({"runtime_env": {"env_vars": {"B": "2"}, "pip": ["x"]}}))
    monkeypatch.delenv(RUN_ENV, raising=False)
    ray_entry.adopt_env(str(env_file))
    job = json.loads(__import__("os").environ[ray_entry.JOB_CONFIG])
    assert job == {"runtime_env": {"env_vars": {"B": "2", RUN_ENV: "harness-s-on-1", "A": "1"}, "pip": ["x"]}}
    assert __import__("os").environ[RUN_ENV] == "harness-s-on-1"


def bundle_of(tmp_path: Path, verl: bool = True) -> bytes:
    """A run's bundle as the harness makes it: the harness's package, a verl source tree, msprobe's wheel."""
    import io
    import tarfile

    files = {"harness-src/harness/__init__.py": b"", "wheels/mindstudio_probe-26.2.0-py3-none-any.whl": b"w"}
    if verl:
        files |= {"verl/pyproject.toml": b"[project]\nname = 'verl'\n", "verl/verl/__init__.py": b""}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_a_node_installs_the_verl_of_its_bundle_not_editable_and_msprobe_and_sees_the_harness(tmp_path, monkeypatch):
    import site
    import subprocess
    import tempfile

    from harness.training.executors import ray_gather

    runs: list[list[str]] = []
    monkeypatch.setattr(ray_gather, "node_facts", lambda: {"ip": "10.0.0.3", "hostname": "w", "node_id": "n"})
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: runs.append(argv) or SimpleNamespace(returncode=0))
    bundle = bundle_of(tmp_path)
    fact = ray_gather.setup_node(bundle, hashlib.sha256(bundle).hexdigest(), None)
    here = Path((tmp_path / "verl-msprobe-harness-rayjob.pth").read_text().strip()).parent
    assert here.parent == tmp_path and (here / "verl" / "verl" / "__init__.py").is_file()  # this node's own copy
    assert [r[4:] for r in runs] == [
        ["--no-deps", "--no-index", "--no-build-isolation", str(here / "verl")],  # not editable: no -e
        ["--no-deps", "--no-index", str(here / "wheels" / "mindstudio_probe-26.2.0-py3-none-any.whl")],
    ]
    assert fact["line"] == f"node 10.0.0.3 (w): verl installed from the run's bundle, 1 wheel(s), the harness from " \
                           f"{here / 'harness-src'}"  # fmt: skip
    with pytest.raises(RuntimeError, match=r"^node 10\.0\.0\.3 \(w\): the run's bundle arrived changed"):
        ray_gather.setup_node(bundle + b"x", hashlib.sha256(bundle).hexdigest(), None)
    # a release: the image's own verl must be it
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.10.0.dev0")
    release = bundle_of(tmp_path, verl=False)
    with pytest.raises(RuntimeError, match=r"the image holds verl 0\.10\.0\.dev0, the run names verl==0\.9\.1"):
        ray_gather.setup_node(release, hashlib.sha256(release).hexdigest(), "0.9.1")
    monkeypatch.setattr(
        subprocess, "run", lambda argv, **kw: SimpleNamespace(returncode=1, stderr="ERROR: no space left\n")
    )
    with pytest.raises(RuntimeError, match=r"^node 10\.0\.0\.3 \(w\): pip install .*/verl: ERROR: no space left$"):
        ray_gather.setup_node(bundle, hashlib.sha256(bundle).hexdigest(), None)
