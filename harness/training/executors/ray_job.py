"""Ray executor: each training is a job on an existing Ray cluster, submitted with Ray's Job Submission API.

The job's entrypoint (``ray_entry``) runs on the cluster's head: it places the run's files on every node, runs the
workload's module (verl's ``main_ppo``, which joins the cluster), and gathers every node's dumps into the run dir,
which must be at the same path there (a shared filesystem). Here: the cluster is reached and checked (the token
accepted, enough nodes with the ranks' resource), the job submitted, its log streamed into ``train.log`` as it comes,
its end mapped to what the local executor reports (an exit code and its log for the crash classifier; a timeout;
a stop), and a stopped or timed-out job stopped on the cluster, its actors waited for and its node dirs removed by a
clean-up job: nothing of it keeps running there. While it follows the job the harness renews a lease in the run dir
(``ray_lease``): a harness killed outright (SIGKILL), which stops nothing, leaves a lease that goes stale, and the
job's entrypoint then stops the training and removes the run from every node itself.

Job ends: SUCCEEDED is exit 0 where the job gathered (its ``nodes.json``: a job said to succeed that gathered nothing
is the cluster's failure, not verl's); FAILED the driver's exit code (its traceback decides whose fault, as for a local
run), or, where the entrypoint never ran (its runtime environment failed, the supervisor died), an infrastructure error
with Ray's message; the entrypoint's own failure (``HARNESS RAY ERROR:`` in its log) an infrastructure error with
that line; STOPPED by the harness a timeout or a monitor's stop; STOPPED by anyone else an infrastructure error.
What the cluster says (a job's message, its log's error line, an actor's name) is shown as data (``outside.shown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from harness import config
from harness.artifacts.nodes import NodesRecord
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.errors import HarnessError, InfraError
from harness.outside import shown
from harness.remote import RemoteError
from harness.safeio import open_to_write, tail_bytes, write_atomic
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.settings.ray import RayRuntime
from harness.signals import interrupts, note_stopped
from harness.training.executors import ray_entry, ray_lease
from harness.training.executors.base import LABEL_PREFIX, owner_gone
from harness.training.executors.ray_cluster import RUN_ENV, TERMINAL, Cluster, address, said
from harness.training.launch import Launch, NodeRun, argv_lines

POLL_S = 1.0
STATUS_GRACE_S = 60.0  # a dashboard that does not answer the job's status this long in a row is lost
STOP_WAIT_S = 60  # a stopped job's end and its actors' exit
CLEAN_WAIT_S = 120


def entry_argv(launch: Launch, run: RunDir, python: str) -> list[str]:
    """The job's entrypoint: the harness's entry around the workload's module, in the target's interpreter."""
    node = launch.on_nodes("ray")
    inputs = [a for p in launch.inputs for a in ("--input", str(p))]
    return [
        python, "-m", ray_entry.__name__, "run", "--run", str(run.root), "--node-root", str(node.root),
        "--job", node.job, "--lease-stale-s", f"{ray_lease.STALE_S:g}", *inputs, "--", launch.module, *launch.args,
    ]  # fmt: skip


def runtime_env(launch: Launch, rt: RayRuntime) -> dict[str, Any]:
    """The job's runtime environment, on every node: the workload's variables and the run's id on every actor (how
    its actors are found: ranks' nodes, leftovers). The workers' interpreter is the workload's to set (verl's
    ``ray_kwargs.ray_init.runtime_env.py_executable``: a job's own would conflict with it)."""
    env = {**rt.env, "PYTHONUNBUFFERED": "1", **launch.env, RUN_ENV: launch.on_nodes("ray").job}
    if gate := config.GATHER_GATE.text():
        env[config.GATHER_GATE.name] = gate
    return {"env_vars": env}



class RayJobExecutor:
    name: ClassVar[str] = "ray"

    def execute(
        self,
        launch: Launch,
        run: RunDir,
        settings: ExecutorSettingsBase,
        labels: dict[str, str],
        stop: threading.Event | None = None,
    ) -> ExecResult:
        rt: RayRuntime = settings.options("ray")
        node = launch.on_nodes("ray")
        python = launch.python or sys.executable
        cluster = Cluster.connect(address(rt))
        if not cluster.authenticated:
            print(f"harness: the Ray cluster at {cluster.address} asks for no token: anyone who reaches it runs code "
                  "on it (start it with RAY_AUTH_MODE=token)", file=sys.stderr, flush=True)  # fmt: skip
        cluster.check_nodes(node)
        marker = run.root / ray_entry.MARKER
        write_atomic(marker, node.job)
        argv = entry_argv(launch, run, python)
        metadata = {k: v for k, v in labels.items() if isinstance(v, str)}
        started = time.monotonic()
        with ray_lease.Renewal(run.root / ray_lease.FILE):  # renewed until the job and its clean-up are over
            try:
                with interrupts():
                    _submit(cluster, node.job, argv, runtime_env(launch, rt), metadata)
                    return _follow(cluster, node, run, settings, stop or threading.Event(), started, argv)
            except KeyboardInterrupt as exc:
                note_stopped(exc, f"Ray job {node.job} on {cluster.address} (stopped)")
                _stop(cluster, node, python)
                raise
            finally:
                marker.unlink(missing_ok=True)

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        rt: RayRuntime = settings.options("ray")
        python = launch.python or sys.executable
        node = launch.on_nodes("ray")
        try:
            where = address(rt)
        except InfraError:
            where = "(none named: --ray-address, HARNESS_RAY_ADDRESS or executor.ray.address)"
        env = runtime_env(launch, rt)
        return [
            f"Ray job {node.job} on the cluster at {where} ({node.nnodes} node(s) with {node.per_node} "
            f"{node.resource} each), timeout {settings.timeout_s:g}s",
            f"each node's own dir for this run: {node.root} (save_path {node.dumps}), gathered into {run.root}",
            f"interpreter on every node: {python}",
            "env (every node):",
            *(f"  {k}={v}" for k, v in sorted(env["env_vars"].items())),
            "entrypoint (on the head, the run dir at the same path):",
            *argv_lines(entry_argv(launch, run, python)),
        ]

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        try:
            return {"ray_address": address(settings.options("ray"))}
        except InfraError:
            return {}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None  # the cluster's nodes hold the devices, not this host

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        """Stop the jobs whose harness process (on this host) is gone on every cluster named here: by
        ``--ray-address`` / HARNESS_RAY_ADDRESS and by the scenarios' ``executor.ray.address``. Such a job stops
        itself once its lease is stale (``ray_lease``); this stops it at once. Best effort, at session start."""
        return [line for addr in sweep_addresses(settings) for line in _sweep(addr)]


def sweep_addresses(settings: Sequence[ExecutorSettingsBase]) -> list[str]:
    """The clusters a session names: the command's (``--ray-address``, HARNESS_RAY_ADDRESS), the scenarios'."""
    found = set()
    with contextlib.suppress(InfraError):  # none named, or no address: nothing to sweep there
        found.add(address(RayRuntime()))
    for s in settings:
        rt = s.options("ray")
        if isinstance(rt, RayRuntime) and rt.address:
            found.add(rt.address)
    return sorted(found)


def _sweep(addr: str) -> list[str]:
    try:
        cluster = Cluster.connect(addr)
        jobs = cluster.client.list_jobs()
    except Exception:  # nothing to reach is nothing to sweep
        return []
    lines = []
    for job in jobs:
        meta = job.metadata or {}
        if str(job.status) in TERMINAL or f"{LABEL_PREFIX}.session" not in meta or not owner_gone(meta):
            continue
        with contextlib.suppress(Exception):
            cluster.client.stop_job(str(job.submission_id))
            scenario, pid = meta.get(f"{LABEL_PREFIX}.scenario"), meta.get(f"{LABEL_PREFIX}.pid")
            lines.append(f"stopped stale Ray job {shown(job.submission_id)} on {cluster.address} (scenario "
                         f"{shown(scenario)}, its harness pid {shown(pid)} is gone)")  # fmt: skip
    return lines


def _submit(cluster: Cluster, job: str, argv: list[str], env: dict[str, Any], metadata: dict[str, str]) -> None:
    try:
        cluster.client.submit_job(entrypoint=shlex.join(argv), submission_id=job, runtime_env=env, metadata=metadata)
    except Exception as exc:  # Ray raises RuntimeError and others: one line
        raise InfraError(f"the Ray cluster at {cluster.address} refused the job: {said(exc)}") from None


def _follow(
    cluster: Cluster,
    node: NodeRun,
    run: RunDir,
    settings: ExecutorSettingsBase,
    stop: threading.Event,
    started: float,
    argv: list[str],
) -> ExecResult:
    """Stream the job's log while it runs; stop it past the timeout or when asked; what its end means."""
    logs = threading.Thread(target=_copy_logs, args=(cluster, node.job, run.log), daemon=True)
    logs.start()
    timed_out = stopped = False
    while (status := _status(cluster, node.job)) not in TERMINAL:
        timed_out = time.monotonic() - started > settings.timeout_s
        stopped = stop.is_set()
        if timed_out or stopped:
            _stop(cluster, node, argv[0])
            status = _status(cluster, node.job)
            break
        time.sleep(POLL_S)
    wall = time.monotonic() - started
    logs.join(timeout=30)
    info = _asked(cluster, cluster.client.get_job_info, node.job)
    message = shown(info.message) if isinstance(info.message, str) and info.message.strip() else ""
    detail = f"Ray job {node.job} on {cluster.address}: {status}" + (f" ({message})" if message else "")
    if timed_out or stopped:
        return ExecResult(None, wall, timed_out=timed_out, stopped=stopped, detail=detail, argv=argv)
    if line := _entry_error(run.log):
        raise InfraError(f"Ray job {node.job}: {line}")
    record = NodesRecord.read(run.nodes)
    if status == "SUCCEEDED":
        if record is None:  # the entrypoint writes it before it may succeed: the cluster's word alone
            raise InfraError(f"Ray job {node.job} on {cluster.address} ended SUCCEEDED with nothing gathered (no "
                             "nodes.json in the run dir): not the harness's entrypoint's end")  # fmt: skip
        return ExecResult(0, wall, detail=detail, argv=argv)
    if status == "STOPPED":
        raise InfraError(f"Ray job {node.job} was stopped on the cluster at {cluster.address}, not by the harness")
    code = info.driver_exit_code
    if not isinstance(code, int):  # the entrypoint never ran: its runtime environment, the supervisor
        raise InfraError(f"Ray job {node.job} failed before its entrypoint ran: {message}")
    if record is not None and (gone := [n for n in record.nodes if not n.alive or n.problem]):
        # whatever the training then raised (a rank's peer lost), the cause is the node: no verdict, nothing to judge;
        # Ray may still count a node that just died as alive, its dumps then fail to stream back
        lost = "; ".join(f"{n.name} (ranks {n.ranks}) {'died during the run' if not n.alive else n.problem}"
                         for n in gone)  # fmt: skip
        raise InfraError(
            f"Ray job {node.job}: {lost}: its dumps with it (the training then exited with code {code}; nodes.json: "
            "gathering incomplete)"
        )
    return ExecResult(code, wall, detail=detail, argv=argv)


def _entry_error(log: Path) -> str | None:
    """The entrypoint's own failure: its last ``HARNESS RAY ERROR:`` line (the job's log: shown as data)."""
    lines = [ln for ln in tail_bytes(log, 1 << 16).splitlines() if ln.startswith(ray_entry.ERROR)]
    return shown(lines[-1].removeprefix(ray_entry.ERROR).strip()) if lines else None


def _asked(cluster: Cluster, call: Any, job: str) -> Any:
    """``call(job)`` of the cluster's client; InfraError in one line where the cluster is lost or answers what Ray's
    client cannot read."""
    try:
        return call(job)
    except Exception as exc:
        raise InfraError(f"lost the Ray cluster at {cluster.address} during the run: {said(exc)}") from None


def _status(cluster: Cluster, job: str) -> str:
    """The job's status. A dashboard that fails to answer is asked again every ``POLL_S`` for ``STATUS_GRACE_S``: a
    blip (a restart, one dropped request) is no lost cluster, and giving up on it would abandon a healthy run, whose
    lease then stops it; past the grace, InfraError in one line."""
    until = time.monotonic() + STATUS_GRACE_S
    while True:
        try:
            return str(cluster.client.get_job_status(job))
        except Exception as exc:
            if time.monotonic() >= until:
                raise InfraError(f"lost the Ray cluster at {cluster.address} during the run: {said(exc)} (no "
                                 f"answer for {STATUS_GRACE_S:g} s)") from None  # fmt: skip
            time.sleep(POLL_S)


def _copy_logs(cluster: Cluster, job: str, log: Path) -> None:
    """The job's stdout and stderr, as they come, into the run's log (a timeout still has its tail)."""

    logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)  # its "WebSocket closed" line
    try:  # the run dir is the cluster's to write too: never through a link it left there
        out = open_to_write(log)
    except HarnessError as exc:
        print(f"harness: Ray job {job}: its log is not copied: {exc}", file=sys.stderr, flush=True)
        return

    async def follow() -> None:
        async for chunk in cluster.client.tail_job_logs(job):
            out.write(chunk)
            out.flush()

    with out:
        try:
            asyncio.run(follow())
        except RemoteError as exc:  # a redirect: said in the log, which the job's end is judged on
            out.write(f"\n[harness] the job's log was not followed further: {exc}\n")
        except Exception:  # the job ended or the cluster went: what was copied stays
            pass


def _stop(cluster: Cluster, node: NodeRun, python: str) -> None:
    """Stop the job, wait for it and its actors to end, then remove its node dirs (a clean-up job): nothing of the
    run keeps running on the cluster. Best effort, each failure a line on stderr."""
    deadline = time.monotonic() + STOP_WAIT_S
    try:
        cluster.client.stop_job(node.job)
        while _status(cluster, node.job) not in TERMINAL and time.monotonic() < deadline:
            time.sleep(POLL_S)
        while (left := cluster.actors(node.job)) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if left:
            names = ", ".join(sorted({shown(a.get("class_name"), 80) for a in left}))
            print(f"harness: Ray job {node.job}: {len(left)} actor(s) still alive on {cluster.address} after "
                  f"{STOP_WAIT_S}s: {names}", file=sys.stderr, flush=True)  # fmt: skip
        clean = f"{node.job}-clean"
        entry = [python, "-m", ray_entry.__name__, "clean", "--node-root", str(node.root)]
        cluster.client.submit_job(entrypoint=shlex.join(entry), submission_id=clean)
        deadline = time.monotonic() + CLEAN_WAIT_S
        while _status(cluster, clean) not in TERMINAL and time.monotonic() < deadline:
            time.sleep(POLL_S)
    except Exception as exc:  # the cluster may be what failed: said, never raised over the cause
        print(f"harness: stopping Ray job {node.job} on {cluster.address}: {said(exc)}", file=sys.stderr, flush=True)
