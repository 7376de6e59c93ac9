"""The rayjob executor (verl's RayJob submitter) without a cluster: its protocol read from verl's own multi-node
nightly (a copy in tests/data/verl_multinode, with the verl commit it came from), then the executor against a fake
submitter service on 127.0.0.1 serving each way a job ends, each mapped to its verdict class and exit code, the run's
jobs DELETEd every time; and the bad input: a shared cache that is full or read-only, two scenarios at once."""

from __future__ import annotations

import _thread
import contextlib
import errno
import json
import os
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from fake_servers import RUNNING, STARTED, Service, drip, elsewhere, ev, redirect_to, serving
from pydantic import ValidationError

from harness.artifacts.crash import classify
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import ScenarioDir
from harness.errors import HarnessError, InfraError
from harness.outcomes import EXIT_ERROR, EXIT_FAIL, EXIT_PASS
from harness.safeio import validation_line
from harness.scenario.loader import load_scenario
from harness.scenario.settings.rayjob import RayJobRuntime
from harness.training.devices import cluster_missing
from harness.training.executors import rayjob
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
    body = rayjob.payload(RayJobRuntime(), node, rayjob.job_files(RayJobRuntime(), node)[0], {"A": "1"})
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
    script = rayjob.job_script(launch, run, rt, node, node.resource)
    lines = script.splitlines()
    setup = next(i for i, ln in enumerate(lines) if ".ray_entry setup " in ln)
    started = lines.index(f"echo '{rayjob.STARTED}'")
    entry = next(
        i for i, ln in enumerate(lines) if ln.startswith("exec python3 -m harness.training.executors.ray_entry run")
    )
    assert setup < started < entry
    assert f"--run {run.root}" in lines[entry] and f"--node-root {node.root}" in lines[entry]
    assert "--nodes 2 --resource NPU" in lines[setup]
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


def setup_run(tmp_path: Path, url: str, **block: Any) -> tuple[RayJobRuntime, NodeRun, Launch, Any]:
    cache = Path(block.pop("cache", tmp_path / "cache"))
    rt = RayJobRuntime(url=url, cache=str(cache), retry_delay_s=0, watch_retries=2, **block)
    node = NodeRun.new("/tmp/harness-ray", "s", "on", 2, 8, "NPU", "python3")
    launch = Launch(module="verl.trainer.main_ppo", args=["trainer.nnodes=2"], env={"A": "1"}, workdir=tmp_path,
                    inputs=[Path("/models/q")], node=node)  # fmt: skip
    run = ScenarioDir(cache / "results" / tmp_path.name / "s").run("on")
    run.root.mkdir(parents=True)
    return rt, node, launch, run


def execute(tmp_path: Path, srv: Service, timeout_s: float = 60, stop: threading.Event | None = None, **block: Any):
    rt, _, launch, run = setup_run(tmp_path, srv.url, **block)
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


DELETED = [f"/api/v1/workflows/{RUN_ID}?attempt=1"]


def test_a_job_that_succeeds_is_a_pass_and_the_payload_is_what_dry_run_shows(tmp_path, service):
    srv = service()
    assert outcome(tmp_path, srv) == ("passed", EXIT_PASS, "")
    assert srv.requests[0] == ("POST", "/api/v1/rayjobs")
    assert srv.requests[1] == ("GET", "/api/v1/rayjobs/rayjob-1/watch?format=ndjson")
    assert srv.deleted() == DELETED
    (body,) = srv.payloads
    assert list(body) == list(rayjob.PAYLOAD_KEYS) and body["github_run_id"] == RUN_ID
    assert body["env"]["A"] == "1" and body["env"][RUN_ENV].startswith("harness-s-on-")
    assert body["script"].startswith(str(tmp_path / "cache" / rayjob.JOBS_DIR))
    assert not list((tmp_path / "cache" / rayjob.JOBS_DIR).glob("*.sh"))  # the job's files go with it


def test_a_training_that_fails_in_verl_is_a_verdict_on_verl(tmp_path, service):
    log = [ev("log", line=ln) for ln in TRACEBACK.splitlines()]
    srv = service(watches=[[STARTED, RUNNING, *log, ev("final", status="FAILED", message="job failed")]])
    party, code, line = outcome(tmp_path, srv)
    assert (party, code) == ("verl", EXIT_FAIL) and "Unknown precision_debugger stage" in line
    assert srv.deleted() == DELETED


@pytest.mark.parametrize(
    ("post", "watches", "line"),
    [
        ((200, "<html>502 Bad Gateway</html>"), None, r":\d+ answered HTTP 200 with no JSON: <html>502"),
        ((503, '{"detail": "quota exceeded"}'), None, r"refused the job: HTTP 503: quota exceeded"),
        ((200, '{"id": "x"}'), None, r"without a job_id"),
        (None, [[STARTED, ev("final", status="TIMEOUT", message="deadline")]], r"ended TIMEOUT at the submitter"),
        (None, [[ev("final", status="NOT_FOUND")]], r"ended NOT_FOUND at the submitter: the job or its cluster"),
        (None, [[ev("error", message="pod evicted"), ev("final", status="FAILED")]], r"FAILED before its training"),
        (None, [[STARTED, RUNNING]], r"watch of RayJob rayjob-1 was lost .*final event \(tried 3 times\)"),
        (None, [[STARTED, "HARNESS RAY ERROR: node 10.0.0.3 (w): /models/q is absent"]], None),
    ],
    ids=["non-json", "non-2xx", "no-job-id", "timeout", "not-found", "failed-before-start", "watch-lost", "entry"],
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
    assert srv.deleted() == DELETED  # every way out, a refused POST too


def test_a_watch_that_drops_is_resumed(tmp_path, service):
    srv = service(watches=[[STARTED, RUNNING], [ev("log", line="step 2"), ev("final", status="SUCCEEDED")]])
    res, run = execute(tmp_path, srv)
    assert res.exit_code == 0 and srv.watched() == 2 and srv.deleted() == DELETED
    text = run.log.read_text()
    assert "[rayjob status] status=RUNNING rayjob_status=RUNNING deployment_status=Running" in text
    assert text.index("step 2") < text.index("[rayjob final] SUCCEEDED")


def test_a_watch_that_never_ends_is_bounded_by_the_scenarios_timeout(tmp_path, service):
    srv = service(watches=[None])
    started = time.monotonic()
    party, code, line = outcome(tmp_path, srv, timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert (party, code) == ("infrastructure", EXIT_ERROR) and "timed out after 1s" in line
    assert srv.deleted() == DELETED


def test_a_stop_and_ctrl_c_delete_the_runs_jobs(tmp_path, service):
    stop = threading.Event()
    srv = service(watches=[None])
    srv.on_watch = stop.set
    res, _ = execute(tmp_path / "stop", srv, stop=stop)
    assert res.stopped and srv.deleted() == DELETED
    srv2 = service(watches=[None])
    srv2.on_watch = _thread.interrupt_main
    with pytest.raises(KeyboardInterrupt):
        execute(tmp_path / "int", srv2)
    assert srv2.deleted() == DELETED


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "said"),
    [(errno.ENOSPC, "is full (No space left on device"), (errno.EROFS, "is read-only here (Read-only file system")],
)
def test_a_shared_cache_full_or_read_only_is_one_line_and_nothing_submitted(tmp_path, service, monkeypatch, code, said):
    srv = service()

    def refuse(self: Path, *a: Any, **k: Any) -> int:
        raise OSError(code, __import__("os").strerror(code))

    monkeypatch.setattr(Path, "write_text", refuse)
    kind, exit_code, line = outcome(tmp_path, srv)
    assert (kind, exit_code) == ("InfraError", EXIT_ERROR)
    assert f"the shared cache {tmp_path / 'cache'} {said}" in line and "\n" not in line
    assert srv.requests == []


def test_a_results_dir_outside_the_shared_cache_is_refused(tmp_path, service):
    srv = service()
    rt, _, launch, _ = setup_run(tmp_path, srv.url)
    outside = ScenarioDir(tmp_path / "elsewhere").run("on")
    outside.root.mkdir(parents=True)
    settings = SimpleNamespace(timeout_s=60, options=lambda kind: rt)
    with pytest.raises(InfraError, match=r"is not under the shared cache .*: the RayJob's pods see only that"):
        rayjob.RayJobSubmitterExecutor().execute(launch, outside, settings, {})  # type: ignore[arg-type]
    assert srv.requests == []


def test_two_scenarios_submitted_at_once_under_one_run_the_second_is_refused(tmp_path, service):
    srv = service()
    rt, *_ = setup_run(tmp_path, srv.url)
    with rayjob.RunLock(rt, RUN_ID, "first_scenario"):
        kind, code, line = outcome(tmp_path / "x", srv, cache=str(tmp_path / "cache"))
    assert (kind, code) == ("InfraError", EXIT_ERROR)
    assert f"another scenario is being submitted under run {RUN_ID} at once (scenario first_scenario" in line
    assert srv.requests == []
    assert outcome(tmp_path / "y", srv, cache=str(tmp_path / "cache"))[1] == EXIT_PASS  # released: the next one runs


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
    assert srv.watched() == 0 and srv.deleted() == DELETED


def test_a_redirect_to_another_host_is_never_followed_the_delete_never_sent_there(tmp_path, service, capsys):
    with elsewhere() as other:
        srv = service(delete=redirect_to(other.url))
        assert outcome(tmp_path, srv)[:2] == ("passed", EXIT_PASS)
        srv2 = service(post=redirect_to(other.url))
        kind, _, line = outcome(tmp_path / "post", srv2)
    assert other.heard == []
    assert kind == "InfraError" and "POST /api/v1/rayjobs was redirected to another host" in line
    err = capsys.readouterr().err
    assert f"DELETE of run {RUN_ID}'s RayJobs at {srv.url} failed: " in err
    assert "DELETE /api/v1/workflows/4242 was redirected to another host" in err and "not followed" in err


def test_a_submitter_that_drips_holds_neither_the_post_nor_the_delete_past_its_bound(tmp_path, service, monkeypatch):
    srv = service(post=drip)
    started = time.monotonic()
    kind, _, line = bounded(lambda: outcome(tmp_path, srv, timeout_s=2), 20)
    assert time.monotonic() - started < 8
    assert kind == "InfraError" and "POST /api/v1/rayjobs not answered within 2 s" in line
    monkeypatch.setattr(rayjob, "DELETE_TIMEOUT_S", 1.0)
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
    assert outside.read_text() == "keep me" and srv.deleted() == DELETED


def test_a_run_leaves_nothing_in_the_shared_cache_and_its_lock_still_excludes(tmp_path, service):
    srv = service()
    assert outcome(tmp_path, srv)[1] == EXIT_PASS
    assert sorted(p.name for p in (tmp_path / "cache" / rayjob.JOBS_DIR).iterdir()) == []
    rt, *_ = setup_run(tmp_path / "b", srv.url, cache=str(tmp_path / "cache"))
    # the race its removal opens: B opens the name while A holds it, A ends (the name goes), C takes the name's new
    # file; B's lock on A's old file must not let B run beside C
    a = rayjob.RunLock(rt, RUN_ID, "a").__enter__()
    b_opened = os.open(a.path, os.O_RDWR)
    a.__exit__(None, None, None)
    assert not a.path.exists()
    with rayjob.RunLock(rt, RUN_ID, "c"):
        b = rayjob.RunLock(rt, RUN_ID, "b")
        opens = [b_opened]
        fresh = b._open
        b._open = lambda: opens.pop() if opens else fresh()  # type: ignore[method-assign]
        with pytest.raises(InfraError, match=r"being submitted under run 4242 at once \(scenario c"):
            b.__enter__()
    assert not a.path.exists()


def test_a_link_at_the_locks_name_is_refused_never_written_through(tmp_path, service):
    srv = service()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    lock = tmp_path / "cache" / rayjob.JOBS_DIR / f"run-{RUN_ID}.lock"
    lock.parent.mkdir(parents=True)
    lock.symlink_to(outside)
    kind, _, line = outcome(tmp_path, srv)
    assert kind == "InfraError" and line.endswith("a symbolic link in the shared cache: the run's lock is never "
                                                  "opened through a link (remove it)")  # fmt: skip
    assert outside.read_text() == "keep me" and srv.requests == []


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
    assert job["strategy"]["max-parallel"] == 1  # one scenario at a time under the run whose jobs are deleted
    # the action majors verl's multi-node job runs (checkout v4), pinned by commit; node20 majors only in its image
    assert {s["uses"] for s in verl_job["steps"] if "uses" in s} == {"actions/checkout@v4"}
    for step in job["steps"]:
        if "uses" in step:
            action = step["uses"].split(" ")[0]
            assert re.fullmatch(r"actions/(checkout|upload-artifact)@[0-9a-f]{40}", action), action
    text = WORKFLOW.read_text()
    assert re.search(r"actions/checkout@[0-9a-f]{40} # v4\.", text)
    # the clean-up verl's job runs on always(), verbatim: a cancelled job's RayJobs go too
    verl_clean = next(s for s in verl_job["steps"] if s.get("name") == "Cleanup RayJobs")
    our_clean = next(s for s in job["steps"] if "RayJobs" in s.get("name", "") and "curl" in s.get("run", ""))
    assert our_clean["if"] == verl_clean["if"] == "always()"
    assert " ".join(our_clean["run"].replace("\\\n", " ").split()) == " ".join(
        verl_clean["run"].replace("\\\n", " ").split()
    )
    # the results dir lies in the shared cache the scenario's block names, so the job can gather there
    assert job["env"]["RESULTS"].startswith(RayJobRuntime().cache + "/")


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
    script = lines[end + 1 :]
    rayjob.RayJobSubmitterExecutor().execute(launch, run, settings, {})  # type: ignore[arg-type]
    assert srv.payloads == [shown]
    assert [ln.strip() for ln in script] == rayjob.job_script(launch, run, rt, launch.node, "NPU").strip().splitlines()  # type: ignore[arg-type]


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


def test_a_node_installs_verl_and_msprobe_from_the_shared_cache_and_sees_the_harness(tmp_path, monkeypatch):
    import site
    import subprocess

    from harness.training.executors import ray_gather

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "mindstudio_probe-26.2.0-py3-none-any.whl").write_bytes(b"")
    runs: list[list[str]] = []
    monkeypatch.setattr(ray_gather, "node_facts", lambda: {"ip": "10.0.0.3", "hostname": "w", "node_id": "n"})
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: runs.append(argv) or SimpleNamespace(returncode=0))
    said = ray_gather.setup_node("/cache/verl", "/cache/harness", str(wheels))
    assert [r[4:] for r in runs] == [
        ["--no-deps", "--no-build-isolation", "-e", "/cache/verl"],
        ["--no-deps", "--no-index", str(wheels / "mindstudio_probe-26.2.0-py3-none-any.whl")],
    ]
    assert (tmp_path / "verl-msprobe-harness-rayjob.pth").read_text() == "/cache/harness\n"
    assert said.startswith("node 10.0.0.3 (w): verl installed from /cache/verl, 1 wheel(s)")
    monkeypatch.setattr(
        subprocess, "run", lambda argv, **kw: SimpleNamespace(returncode=1, stderr="ERROR: no space left\n")
    )
    with pytest.raises(RuntimeError, match=r"^node 10\.0\.0\.3 \(w\): .*-e /cache/verl: ERROR: no space left$"):
        ray_gather.setup_node("/cache/verl", "/cache/harness", str(wheels))
