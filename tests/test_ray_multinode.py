"""The rayjob executor as verl's multi-node runners see it (#83): a verl crash after any length of log is verl's; the
job tests the verl the harness names, from a directory of its own in a shared cache that verl's nightly and other
runs use too, and leaves nothing there; its DELETE removes its own RayJob only, also inside a workflow that submits
its own; the watch ends as verl's loop ends it (no final event: lost; lines after the final event kept) and a dead
connection is opened again; the DELETE after a signal fits a cancelled step and a second signal does not cut it off;
the job checks every file it reads from the shared cache before use and waits for the harness's lease before it sets
anything up; two pods on one machine are a clear failure; the multi-node scenario sets what verl's multi-node user
sets. And the bad input of verl's runners: one line each, the job deleted, nothing left, no secret shown.

Against the fake submitter on 127.0.0.1 (tests/fake_servers.py); the job script itself runs in bash with a stand-in
``python3`` (its checks are bash's and coreutils', as on the head pod)."""

from __future__ import annotations

import _thread
import contextlib
import errno
import io
import json
import os
import re
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from fake_servers import CUT, SILENT, STARTED, SUCCEEDED, drip, elsewhere, ev, redirect_to, serving
from test_rayjob import (
    RUN_ID,
    SCENARIO,
    TRACEBACK,
    VERL_NIGHTLY,
    execute,
    left_in_cache,
    outcome,
    setup_run,
)

from harness.outcomes import EXIT_ERROR, EXIT_FAIL, EXIT_PASS
from harness.scenario.loader import load_scenario
from harness.targets.spec import Package
from harness.training.executors import ray_entry, ray_gather, ray_lease, rayjob, rayjob_files

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _run_id(monkeypatch):
    monkeypatch.setenv("GITHUB_RUN_ID", RUN_ID)
    monkeypatch.delenv("SUBMITTER_URL", raising=False)
    monkeypatch.delenv("IMAGE", raising=False)
    monkeypatch.setattr(rayjob, "TICK_S", 0.05)


@pytest.fixture
def service():
    with contextlib.ExitStack() as stack:
        yield lambda **kw: stack.enter_context(serving(**kw))


def log_of(size: int) -> list[str]:
    """``size`` bytes or so of a training's log lines, as the watch streams them."""
    line = ev("log", line="(TaskRunner pid=812) step:3 - actor/pg_loss:0.0123 critic/vf_loss:0.4567 " + "x" * 900)
    return [line] * (size // len(line) + 1)


# --- a verl crash after a long log ----------------------------------------------------------------------------------


def test_a_verl_crash_after_a_megabyte_of_log_is_a_verdict_on_verl(tmp_path, service):
    """The STARTED line was looked for in the last 64 KiB of train.log only: 68 KiB of log before verl's traceback
    made verl's crash the infrastructure's."""
    crash = [ev("log", line=ln) for ln in TRACEBACK.splitlines()]
    srv = service(watches=[[STARTED, *log_of(1 << 20), *crash, ev("final", status="FAILED", message="job failed")]])
    party, code, line = outcome(tmp_path, srv)
    assert (party, code) == ("verl", EXIT_FAIL) and "Unknown precision_debugger stage" in line
    assert srv.alive() == []


# --- the shared cache: each run its own, the verl it names ----------------------------------------------------------


def verl_checkout(root: Path, mark: str) -> Package:
    """A verl checkout (a git repository) whose package says ``mark``, as the target spec of ``--verl DIR`` has it."""
    (root / "verl").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text(f"MARK = {mark!r}\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'verl'\nversion = '0.9.1'\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e.invalid"}  # fmt: skip
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", mark]):
        subprocess.run(["git", *argv], cwd=root, env=env, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    return Package(name="verl", kind="checkout", spec=str(root), source=str(root), commit=commit.stdout.strip())


def bundled(script: str) -> dict[str, bytes]:
    """The files of the bundle beside the job script a POST named (read when it was POSTed)."""
    with tarfile.open(fileobj=io.BytesIO(bytes.fromhex(script))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_two_runs_sharing_one_cache_each_test_the_verl_they_name_in_a_directory_of_their_own(tmp_path, service):
    """verl's nightly refills CACHE/verl (rm -rf, tar), and the job installed that checkout, editable, on every node:
    a run overlapping another, or verl's nightly, tested another verl. Two runs at once, each naming its own verl:
    each job's bundle holds the verl its run names, nothing names CACHE/verl, verl's files there are untouched, and
    nothing of either run is left."""
    cache = tmp_path / "cache"
    (cache / "verl").mkdir(parents=True)
    (cache / "verl" / "MARK").write_text("verl's nightly's checkout")
    both = threading.Barrier(2, timeout=30)
    seen: dict[str, Any] = {}

    def run(name: str) -> None:
        srv = service()

        def hold() -> None:  # both runs' files are in the cache at once
            seen[name] = {"script": srv.scripts[-1], "bundle": (Path(srv.payloads[-1]["script"]).parent /
                                                               rayjob_files.BUNDLE).read_bytes().hex()}  # fmt: skip
            both.wait()

        srv.on_watch = hold
        verl = verl_checkout(tmp_path / f"verl-{name}", name)
        seen[f"{name}-result"] = execute(tmp_path / name, srv, cache=str(cache), verl=verl)[0].exit_code

    threads = [threading.Thread(target=run, args=(n,)) for n in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert (seen["A-result"], seen["B-result"]) == (0, 0)
    for name in ("A", "B"):
        files = bundled(seen[name]["bundle"])
        assert files["verl/verl/__init__.py"] == f"MARK = {name!r}\n".encode()
        assert "harness-src/harness/training/executors/ray_entry.py" in files
        assert not re.search(r"/(cache|cicd_test)/verl\b(?!-)", seen[name]["script"])  # verl's nightly's checkout
    assert seen["A"]["script"] != seen["B"]["script"]
    assert (cache / "verl" / "MARK").read_text() == "verl's nightly's checkout"
    assert left_in_cache(tmp_path) == []


def test_stale_directories_are_swept_by_age_and_the_others_kept(tmp_path):
    root = tmp_path / rayjob_files.HARNESS_DIR
    for name in ("harness-s-on-1a2b3c4d", "job-4242-1-s", "harness-s-off-5e6f7a8b", "verls-own"):
        (root / name).mkdir(parents=True)
        (root / name / "f").write_text("x")
    old = time.time() - rayjob_files.STALE_AFTER_S - 60
    for name in ("harness-s-on-1a2b3c4d", "job-4242-1-s", "verls-own"):
        os.utime(root / name, (old, old))
    (root / "harness-linked").symlink_to(tmp_path)  # a link is removed, never followed
    os.utime(root / "harness-linked", (old, old), follow_symlinks=False)
    rt = SimpleNamespace(cache=str(tmp_path))
    settings = [SimpleNamespace(kind="rayjob", options=lambda kind: rt), SimpleNamespace(kind="local")]
    lines = rayjob.RayJobSubmitterExecutor().sweep(settings)  # type: ignore[arg-type]
    assert sorted(p.name for p in root.iterdir()) == ["harness-s-off-5e6f7a8b", "verls-own"]
    assert len(lines) == 3 and all(re.match(r"removed .* from the shared cache: left 24 h ago", ln) for ln in lines)
    assert (tmp_path / rayjob_files.HARNESS_DIR).is_dir()


# --- the DELETE: this training's job only ---------------------------------------------------------------------------


def test_a_harness_job_inside_a_run_that_submits_its_own_rayjob_deletes_its_own_only(tmp_path, service):
    """The DELETE removed every RayJob of the GitHub run id, also when nothing was POSTed: inside a workflow that
    submits RayJobs (verl's own), each side deleted the other's."""
    srv = service()
    srv.runs[RUN_ID] = True  # verl's own RayJob, POSTed under the run's id by verl's submit script
    assert outcome(tmp_path / "a", srv)[1] == EXIT_PASS
    refused = service(post=(503, '{"detail": "quota"}'))
    refused.runs[RUN_ID] = True
    assert outcome(tmp_path / "b", refused)[1] == EXIT_ERROR
    assert srv.alive() == [RUN_ID] and refused.alive() == [RUN_ID]  # verl's job lives on
    (posted,) = srv.payloads
    assert re.fullmatch(rf"{RUN_ID}-[0-9a-f]{{6}}", posted["github_run_id"])
    assert srv.deleted() == [f"/api/v1/workflows/{posted['github_run_id']}?attempt=1"]


def test_each_training_has_a_run_id_and_a_name_verls_submitter_takes(tmp_path, monkeypatch):
    _, _, on, _ = setup_run(tmp_path / "on", "http://127.0.0.1:9")
    _, _, off, _ = setup_run(tmp_path / "off", "http://127.0.0.1:9")
    assert on.node and off.node
    ids = {rayjob.run_id(on.node), rayjob.run_id(off.node)}
    assert len(ids) == 2 and all(re.fullmatch(rf"{RUN_ID}-[0-9a-f]{{6}}", i) for i in ids)
    for node in (on.node, off.node):  # verl's multinode-e2e is 13: KubeRay's 47 with the submitter's prefix
        suffix = rayjob.name_suffix(node)
        assert len(suffix) <= len("multinode-e2e") and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", suffix), suffix
    long = SimpleNamespace(root=Path("/tmp/harness-ray/qwen2_0_5b_fsdp_multinode_with_a_long_name-off-1a2b3c4d"))
    assert rayjob.name_suffix(long) == "pd-off-1a2b3c"  # type: ignore[arg-type]
    monkeypatch.delenv("GITHUB_RUN_ID")
    assert re.fullmatch(r"local-[0-9a-f]{6}", rayjob.run_id(on.node))


def test_the_payload_names_the_verl_under_test_and_the_workflows_image(tmp_path, monkeypatch):
    """commit_sha was the caller's (GITHUB_SHA), the workflow's image input never reached the pods."""
    verl = verl_checkout(tmp_path / "verl", "x")
    rt, node, launch, _ = setup_run(tmp_path, "http://127.0.0.1:9", verl=verl)
    monkeypatch.setenv("GITHUB_SHA", "c" * 40)
    monkeypatch.setenv("IMAGE", "registry.example/verl:a3-nightly")
    body = rayjob.payload(launch, rt, node, None)
    assert body["commit_sha"] == verl.commit and body["image"] == "registry.example/verl:a3-nightly"
    monkeypatch.delenv("IMAGE")
    assert rayjob.payload(launch, rt, node, None)["image"] == rt.image


def test_the_scenarios_env_values_are_never_shown_posted_nor_readable_by_others(tmp_path, service):
    """Values of executor.rayjob.env were printed by the dry run, sent in the payload and written world-readable."""
    srv = service()
    rt, _, launch, run = setup_run(tmp_path, srv.url, env={"HF_TOKEN": "hf_only_the_job_reads_this"})
    settings = SimpleNamespace(timeout_s=60, options=lambda kind: rt)
    lines = rayjob.RayJobSubmitterExecutor().describe(launch, run, settings, {})  # type: ignore[arg-type]
    assert not [ln for ln in lines if "hf_only_the_job_reads_this" in ln]
    assert any("env.json: " in ln and "HF_TOKEN" in ln and "(values not shown)" in ln for ln in lines)
    files = rayjob_files.make(launch, run, rt, launch.node)  # type: ignore[arg-type]
    assert json.loads((files.dir / rayjob_files.ENV).read_text())["HF_TOKEN"] == "hf_only_the_job_reads_this"
    assert [oct(p.stat().st_mode & 0o777) for p in (files.dir, files.dir / rayjob_files.ENV)] == ["0o700", "0o600"]
    rayjob_files.remove(files.dir)
    execute(tmp_path / "run", srv, env={"HF_TOKEN": "hf_only_the_job_reads_this"})
    assert srv.payloads[0]["env"] == {} and "hf_only" not in json.dumps(srv.payloads[0])


# --- the watch, as verl's loop reads it -----------------------------------------------------------------------------


def test_a_watch_that_ends_without_a_final_event_is_lost_not_resumed(tmp_path, service):
    """verl's loop fails a stream that ended cleanly without a final event; the harness opened it again."""
    srv = service(watches=[[STARTED, ev("log", line="step 1")], [SUCCEEDED]])
    kind, code, line = outcome(tmp_path, srv)
    assert (kind, code) == ("InfraError", EXIT_ERROR) and srv.watched() == 1
    assert line.endswith("was lost before its final status: the watch ended without a final event (verl's loop fails "
                         "such a job)")  # fmt: skip
    assert srv.alive() == []


def test_lines_after_a_final_event_are_read_and_the_last_final_stands(tmp_path, service):
    """The harness stopped at the first final event: the lines after it were lost."""
    srv = service(watches=[[STARTED, ev("final", status="FAILED"), ev("log", line="after the final"),
                            ev("final", status="SUCCEEDED")]])  # fmt: skip
    res, run = execute(tmp_path, srv)
    assert res.exit_code == 0 and "after the final" in run.log.read_text()


def test_lines_after_a_final_event_are_read_for_a_bounded_time(tmp_path, service, monkeypatch):
    monkeypatch.setattr(rayjob, "FINAL_GRACE_S", 0.5)
    srv = service(watches=[[STARTED, SUCCEEDED, ev("log", line="after"), SILENT]])
    started = time.monotonic()
    res, run = execute(tmp_path, srv, watch_read_s=600)
    assert res.exit_code == 0 and time.monotonic() - started < 10 and "after" in run.log.read_text()


def test_a_dead_connection_is_opened_again_within_the_read_bound_not_at_the_timeout(tmp_path, service):
    """No read timeout: a connection that went silent held the watch to the scenario's timeout (5,400 s)."""
    srv = service(watches=[[STARTED, ev("log", line="step 1"), SILENT], [ev("log", line="step 2"), SUCCEEDED]])
    started = time.monotonic()
    res, run = execute(tmp_path, srv, timeout_s=60, watch_read_s=0.5)
    assert res.exit_code == 0 and srv.watched() == 2 and time.monotonic() - started < 15
    assert run.log.read_text().index("step 1") < run.log.read_text().index("step 2")


def test_a_watch_that_keeps_breaking_is_lost_after_its_retries_in_a_row(tmp_path, service):
    srv = service(watches=[[STARTED, CUT], [ev("log", line="x"), CUT], [CUT], [CUT], [CUT]])
    kind, _, line = outcome(tmp_path, srv)
    assert kind == "InfraError" and line.endswith("(tried 3 times in a row)") and srv.watched() == 4


# --- the DELETE after a signal --------------------------------------------------------------------------------------


def test_a_second_signal_during_the_delete_does_not_cut_it_off(tmp_path, service):
    """A second signal during the DELETE aborted it, with no retry: the job lived on."""
    tries: list[float] = []

    def delete(handler: Any) -> None:
        tries.append(time.monotonic())
        if len(tries) == 1:  # the second signal, while the harness waits for this answer; then a 500
            _thread.interrupt_main()
            time.sleep(0.3)
            handler.send(500, b"<html>internal error</html>")
            return
        handler.server.remove(handler.path)
        handler.send(200, b'{"deleted": 1}')

    srv = service(delete=delete, watches=[None])
    srv.on_watch = _thread.interrupt_main  # the first: Ctrl-C, or the runner cancelling the step
    with pytest.raises(KeyboardInterrupt):
        execute(tmp_path, srv)
    assert len(tries) == 2 and srv.alive() == [] and left_in_cache(tmp_path) == []


def test_the_delete_after_a_signal_fits_what_a_cancelled_step_is_given(tmp_path, service, capsys):
    """The DELETE waited 30 s; a cancelled step gets 7.5 s after SIGINT, 2.5 s more after SIGTERM."""
    srv = service(delete=drip, watches=[None])
    srv.on_watch = _thread.interrupt_main
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        execute(tmp_path, srv)
    assert time.monotonic() - started < 7.5
    err = capsys.readouterr().err
    assert re.search(r"DELETE of RayJob run 4242-[0-9a-f]{6} at .* failed: .*not answered within", err)


# --- what the job reads from the shared cache -----------------------------------------------------------------------


@pytest.fixture
def job(tmp_path: Path) -> Any:
    """A training's files made in the shared cache as the harness makes them, and a way to run its job script in bash
    as the head pod would, ``python3`` a stand-in that records each call."""
    rt, node, launch, run = setup_run(tmp_path, "http://127.0.0.1:9")
    files = rayjob_files.make(launch, run, rt, node)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "python3").write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n')
    (bin_dir / "python3").chmod(0o755)

    def run_script(arg: str | None = None) -> tuple[int, str, list[str]]:
        argv = ["bash", str(files.script), arg if arg is not None else files.digests[rayjob_files.SCRIPT]]
        done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PATH": f"{bin_dir}:"
                              f"{os.environ['PATH']}"}, check=False, timeout=60)  # fmt: skip
        said = calls.read_text().splitlines() if calls.exists() else []
        calls.unlink(missing_ok=True)
        return done.returncode, done.stdout + done.stderr, said

    return SimpleNamespace(files=files, run=run_script, env=files.dir / rayjob_files.ENV,
                           bundle=files.dir / rayjob_files.BUNDLE)  # fmt: skip


def test_the_job_script_uses_the_files_as_the_harness_wrote_them(job):
    code, out, calls = job.run()
    assert code == 0, out
    assert [c.split()[1:3] for c in calls] == [["harness.training.executors.ray_entry", "setup"],
                                                ["harness.training.executors.ray_entry", "run"]]  # fmt: skip
    assert rayjob_files.STARTED in out
    # what the entrypoint is handed is the pod's own copy, never the shared cache's
    assert f"--env-json {job.files.dir}" not in calls[1]
    assert re.search(r"--env-json /tmp/harness-rayjob\.\w+/env", calls[1])
    assert oct(job.files.dir.stat().st_mode & 0o777) == "0o700" and oct(job.env.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("what", ["env", "bundle", "script"])
def test_a_file_rewritten_in_the_shared_cache_is_refused_before_use_naming_it(job, what):
    """Pull-request code on the same runners, as root on the same cache, could rewrite the job's env file (an
    LD_PRELOAD), the harness, verl or the wheels between the harness's write and their use."""
    if what == "env":
        doc = json.loads(job.env.read_text())
        job.env.write_text(json.dumps({**doc, "LD_PRELOAD": "/root/.cache/cicd_test/evil.so"}))
        name, arg = job.env, None
    elif what == "bundle":
        with job.bundle.open("ab") as f:
            f.write(b"\0" * 512)
        name, arg = job.bundle, None
    else:
        name, arg = job.files.script, "0" * 64  # the payload's digest is not this script's
    code, out, calls = job.run(arg)
    assert code != 0 and calls == []  # nothing ran
    (line,) = [ln for ln in out.splitlines() if ln.startswith(ray_entry.ERROR)]
    assert re.fullmatch(rf"{re.escape(ray_entry.ERROR)} {re.escape(str(name))} changed since the harness wrote it "
                        r"\(sha256 [0-9a-f]{64}, .*\): refused, nothing (of it used|run)", line), line  # fmt: skip


# --- the job's lease from its first step ----------------------------------------------------------------------------


def setup_argv(tmp_path: Path, stale_s: float) -> list[str]:
    bundle = tmp_path / "bundle.tar"
    bundle.write_bytes(b"")
    return ["setup", "--bundle", str(bundle), "--run", str(tmp_path), "--lease-stale-s", f"{stale_s:g}", "--nodes",
            "2", "--resource", "NPU"]  # fmt: skip


def test_the_setup_waits_for_a_renewal_of_the_lease_before_anything(tmp_path, monkeypatch, capsys):
    """Nothing watched the lease during pod start-up or set-up, and the shared filesystem's consistency was assumed:
    a job whose harness died while its pods started set its nodes up all the same."""
    monkeypatch.setattr(ray_lease, "POLL_S", 0.05)
    (tmp_path / ray_lease.FILE).write_text("7\n")  # written once, never renewed
    set_up: list[str] = []
    monkeypatch.setattr(ray_entry, "_setup", lambda args: set_up.append("set up"))
    started = time.monotonic()
    assert ray_entry.main(setup_argv(tmp_path, 0.5)) == EXIT_ERROR and set_up == []
    assert time.monotonic() - started < 5
    out = capsys.readouterr().out
    assert (f"{ray_entry.ERROR} the harness's lease {tmp_path / ray_lease.FILE} did not change within 0.5s as this "
            "pod sees it: the harness is gone, or the shared filesystem does not show this pod") in out  # fmt: skip
    with ray_lease.Renewal(tmp_path / ray_lease.FILE, every_s=0.05):
        assert ray_entry.main(setup_argv(tmp_path, 2)) == 0 and set_up == ["set up"]


def test_a_lease_that_goes_stale_while_the_nodes_are_set_up_ends_the_job(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ray_lease, "POLL_S", 0.05)
    renewal = ray_lease.Renewal(tmp_path / ray_lease.FILE, every_s=0.05)

    def slow(args: Any) -> None:  # the harness is killed while the nodes install verl (ray.get: interruptible)
        renewal._done.set()
        for _ in range(600):
            time.sleep(0.05)

    monkeypatch.setattr(ray_entry, "_setup", slow)
    started = time.monotonic()
    try:
        assert ray_entry.main(setup_argv(tmp_path, 0.5)) == EXIT_ERROR
    finally:
        renewal.close()
    assert time.monotonic() - started < 10
    out = capsys.readouterr().out
    assert "the harness stopped renewing its lease for more than 0.5s while the nodes were set up" in out


# --- the nodes' machines --------------------------------------------------------------------------------------------


def test_two_pods_on_one_machine_are_a_clear_failure(capsys):
    """Each pod asked for 8 NPUs of a 16-NPU A3 node and nothing kept them apart; nodes.json recorded pod addresses."""
    node = lambda ip, host: {"ip": ip, "hostname": f"pod-{ip}", "host": host}  # noqa: E731
    assert ray_entry.one_machine([node("10.0.0.2", "b00t-1"), node("10.0.0.3", "b00t-2")]) is None
    line = ray_entry.one_machine([node("10.0.0.2", "b00tid-1"), node("10.0.0.3", "b00tid-1")])
    assert line == (
        "node 10.0.0.2 (pod-10.0.0.2) and node 10.0.0.3 (pod-10.0.0.3) are pods of one machine (kernel boot id "
        "b00tid-1): the training would span 1 machine(s), not 2 (each pod must take a whole machine: verl's RayJob "
        "asks for all 16 NPUs of an A3 node a pod)"
    )
    assert ray_entry.one_machine([node("10.0.0.2", ""), node("10.0.0.3", "b")]) is None
    assert "node 10.0.0.2 (pod-10.0.0.2): its machine cannot be told" in capsys.readouterr().out


def test_a_nodes_machine_is_its_kernels_boot_id_and_nodes_json_keeps_it(tmp_path):
    from harness.artifacts.nodes import NodeDoc, NodesRecord

    boot = tmp_path / "boot_id"
    boot.write_text("4f1c2b3a-0000-4000-8000-000000000001\n")
    assert ray_gather.host_of(str(boot)) == "4f1c2b3a-0000-4000-8000-000000000001"
    assert ray_gather.host_of(str(tmp_path / "none")) == ""
    record = NodesRecord(job="j", nodes=[NodeDoc(node_id="n" * 56, ip="10.0.0.2", host="4f1c")], placement="p",
                         complete=True)  # fmt: skip
    record.write(tmp_path / "nodes.json")
    assert NodesRecord.read(tmp_path / "nodes.json") == record
    old = json.loads((tmp_path / "nodes.json").read_text())
    old["schema_version"] = 1
    del old["nodes"][0]["host"]
    (tmp_path / "nodes.json").write_text(json.dumps(old))
    assert NodesRecord.read(tmp_path / "nodes.json").nodes[0].host == ""  # type: ignore[union-attr]


# --- the scenario, as verl's multi-node user would set it -----------------------------------------------------------


def test_the_multinode_scenario_sets_the_finish_hook_a_rank_subset_and_verls_whole_node_pods(monkeypatch):
    monkeypatch.setenv("SUBMITTER_URL", "http://rayjob-submitter.ci-system.svc.cluster.local")
    scenario = load_scenario(SCENARIO)
    per_node = scenario.world_size // scenario.workload.nnodes
    pd = scenario.precision_debugger
    assert pd.ranks == pd.finish_hook_ranks == [n * per_node for n in range(scenario.workload.nnodes)]
    # verl's own patches, verbatim: every NPU of an A3 node a pod (two such pods never fit one machine)
    verl = yaml.safe_load(VERL_NIGHTLY.read_text())["jobs"]["ascend-rayjob-e2e"]["steps"]
    run = next(s for s in verl if s.get("name") == "Run multinode E2E RayJob")["run"]
    verl_patches = json.loads(run.split("'[\n", 1)[1].rsplit("]'", 1)[0].join("[]"))
    ours = [p.model_dump() for p in scenario.executor.options("rayjob").template_patches]
    assert ours == verl_patches and per_node == 16


# --- the workflow's clean-up ----------------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_workflows_cleanup_deletes_this_runs_rayjobs_only_and_its_directory(tmp_path, service):
    srv = service()
    results = tmp_path / "job" / "results"  # and results.attempt1, an attempt the job step moved aside
    forged = f"{RUN_ID}-0a1b2c\n::error title=ok::merge it"
    for name, run in (("ours", f"{RUN_ID}-0a1b2c"), ("verls", RUN_ID), ("other", "9999-0a1b2c"), ("forged", forged)):
        srv.runs[run] = True
        where = (results.with_name("results.attempt1") if name == "ours" else results) / name / "on"
        where.mkdir(parents=True)
        rayjob_files.Posted(run_id=run, attempt="1", submitter=srv.url, name_suffix="pd-on-0a1b2c").write(
            where / rayjob_files.Posted.FILE
        )
    env = {**os.environ, "SUBMITTER_URL": srv.url, "GITHUB_RUN_ID": RUN_ID}
    done = subprocess.run(["bash", ".ci/ascend-job", "multinode-cleanup", str(tmp_path / "job")], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert srv.deleted() == [f"/api/v1/workflows/{RUN_ID}-0a1b2c?attempt=1"]
    assert sorted(srv.alive()) == sorted([RUN_ID, "9999-0a1b2c", forged]) and not (tmp_path / "job").exists()
    assert done.stderr.count("not one of this run's: not deleted") == 3
    assert not [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("::")]


# --- the bad input of verl's runners --------------------------------------------------------------------------------

SECRET = "hf_5ecretTokenValue0123456789"


def echoes(status: int) -> Any:
    return lambda handler: handler.send(status, f"<html><body>bad gateway for {SECRET}</body></html>".encode())


def delete_500(times: int) -> Any:
    """A DELETE answered 500 ``times`` times (a page that echoes the secret), then as the submitter answers it."""
    tries: list[int] = []

    def delete(handler: Any) -> None:
        tries.append(1)
        if len(tries) <= times:
            handler.send(500, f"<html>internal error ({SECRET})</html>".encode())
            return
        handler.server.remove(handler.path)
        handler.send(200, b'{"deleted": 1}')

    return delete


def full_cache(code: int) -> Any:
    real = rayjob_files._open

    def refuse(path: Path, mode: int) -> Any:
        if path.name == rayjob_files.BUNDLE:
            raise OSError(code, os.strerror(code))
        return real(path, mode)

    return refuse


TAIL = [ev("log", line=ln) for ln in TRACEBACK.splitlines()]
DELETE_FAILED = r"harness: DELETE of RayJob run 4242-[0-9a-f]{6} at http://127\.0\.0\.1:\d+ failed: "
# each case: the fake's answers, the line the run gives (its verdict's, or the one line it prints), whether the job
# is gone from the submitter afterwards
BAD = {
    "html-200": ({"post": echoes(200)}, r"^the RayJob submitter at http://127\.0\.0\.1:\d+ answered HTTP 200 with "
                 r"no JSON: <html><body>bad gateway for \*\*\*</body></html>$", True),
    "50MB-of-log": ({"watches": [[STARTED, *log_of(50 << 20), *TAIL, ev("final", status="FAILED", message=SECRET)]]},
                    r"ValueError: Unknown precision_debugger stage: train_batch", True),
    "unknown-event": ({"watches": [[STARTED, ev("heartbeat", token=SECRET), ev("final", status="TIMEOUT")]]},
                      r"^RayJob rayjob-1 ended TIMEOUT at the submitter \(its own limit, not the scenario's\)$", True),
    "unknown-final": ({"watches": [[STARTED, ev("final", status="PREEMPTED", message=SECRET)]]},
                      r"^RayJob rayjob-1 ended 'PREEMPTED', not one of verl's SUCCEEDED, FAILED, TIMEOUT, NOT_FOUND "
                      r"\(\*\*\*\)$", True),
    "post-redirected": ({"post": "redirect"}, r"^the RayJob submitter at http://127\.0\.0\.1:\d+: POST /api/v1/rayjobs "
                        r"was redirected to another host \(http://127\.0\.0\.1:\d+/api/v1/rayjobs\): not followed$",
                        True),
    # never followed: nothing deletes the job from here, its lease (no longer renewed) ends it, then the workflow's
    # clean-up step tries again
    "delete-redirected": ({"delete": "redirect"}, DELETE_FAILED + r"the RayJob submitter at .*: DELETE /api/v1/"
                          r"workflows/4242-[0-9a-f]{6} was redirected to another host \(.*\): not followed \(1 try "
                          r"within 2 s\)$", False),
    "delete-500-once": ({"delete": delete_500(1)}, "", True),  # tried again: deleted, nothing to say
    "delete-500": ({"delete": delete_500(1000)}, DELETE_FAILED + r"HTTP 500: <html>internal error \(\*\*\*\)</html> "
                   r"\(\d+ tries within 2 s\)$", False),
    "cache-full": ({"cache": errno.ENOSPC}, r"^the shared cache .* is full \(No space left on device, writing .*/"
                   r"bundle\.tar\): free space there", True),
    "cache-read-only": ({"cache": errno.EROFS}, r"^the shared cache .* is read-only here \(Read-only file system, "
                        r"writing .*/bundle\.tar\): the runner's container must mount it read-write", True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_the_bad_input_of_verls_runners_is_one_line_the_job_deleted_nothing_left_no_secret(
    case, tmp_path, service, monkeypatch, capsys
):
    given, line, gone = dict(BAD[case][0]), *BAD[case][1:]
    monkeypatch.setenv("HF_TOKEN", SECRET)  # the scenario's env holds it; the submitter echoes it
    monkeypatch.setattr(rayjob, "DELETE_BUDGET_S", 2.0)
    if code := given.pop("cache", None):
        monkeypatch.setattr(rayjob_files, "_open", full_cache(code))
    with elsewhere() as other:
        for key in ("post", "delete"):
            if given.get(key) == "redirect":
                given[key] = redirect_to(other.url)
        srv = service(**given)
        started = time.monotonic()
        kind, exit_code, said = outcome(tmp_path, srv, env={"HF_TOKEN": SECRET})
    printed = [ln for ln in "".join(capsys.readouterr()).splitlines() if ln.strip()]
    print(f"{case}: {kind} exit {exit_code}: {said}" + "".join(f"\n  printed: {ln}" for ln in printed))
    assert all(SECRET not in ln for ln in (said, *printed)) and other.heard == []
    assert "\n" not in said and len(printed) <= 1
    if case.startswith("delete"):  # the run's own end (a pass) stands; the DELETE's failure is its one line
        assert (kind, exit_code) == ("passed", EXIT_PASS)
        assert [ln for ln in printed if re.search(line, ln)] == printed and bool(printed) is bool(line)
    else:
        assert exit_code in (EXIT_ERROR, EXIT_FAIL) and re.search(line, said), said
    assert time.monotonic() - started < 60
    assert (srv.alive() == []) is gone and left_in_cache(tmp_path) == []
