"""RayJob executor: each training submitted the way verl's Ascend multi-node nightly submits its jobs
(``.github/workflows/nightly_ascend_multinode.yml``, its ``submit_and_wait_rayjob.sh``), to an in-cluster RayJob
submitter service that makes a fresh KubeRay cluster for the job and tears it down afterwards.

The protocol, as verl's script speaks it: ``POST $SUBMITTER_URL/api/v1/rayjobs`` with a JSON payload (``PAYLOAD_KEYS``:
repository, commit, branch, run id and attempt, image, a name suffix, the script and its args, env, the worker pods,
RFC 6902 patches of the RayJob's template) answers ``{"job_id": ...}``; ``GET .../rayjobs/{job_id}/watch?format=ndjson``
streams one JSON event a line (``EVENT_KINDS``: a log line, a status, the final status, an error), the final one of
``FINAL_STATUSES``; ``DELETE .../api/v1/workflows/{run id}?attempt=N`` removes the run's every RayJob. A watch that
drops is resumed (verl: curl --retry 5 --retry-delay 10); the harness bounds the whole by the scenario's timeout and
sends the DELETE on every way out: success, failure, timeout, a stop, an exception, Ctrl-C.

A node's disk goes with its cluster, so the job script (written into the shared cache, which the runner's container
and every pod see at the same path) gathers inside the job: the harness's Ray entrypoint (``ray_entry``) sets every
node up (``setup``: the verl under test installed from the shared cache, as verl's nightly does), runs the training
and gathers every node's dumps per node and rank into the run dir, which lies in the shared cache (``nodes.json``;
an incomplete gathering is marked there), before the job ends.

What an end means: SUCCEEDED is exit 0; FAILED is the training's failure (its traceback, streamed into ``train.log``,
tells the crash classifier whose code failed: a verdict on verl where it is verl's), unless the job's own entrypoint
failed (its ``HARNESS RAY ERROR:`` line) or the training never started (the pods, the image): infrastructure;
TIMEOUT (the service's own limit) and NOT_FOUND, a submitter that answers non-2xx or non-JSON, a watch lost past its
retries: infrastructure, one line each; past the scenario's timeout, a timeout, as on one host. SUCCEEDED is the
service's word: a job that gathered nothing (no ``nodes.json``, which the job's entrypoint writes before it may
succeed) is the infrastructure's, never a verdict on verl.

The service and the shared cache are outside the harness (docs/security.md): every call goes through
``harness.remote`` (bounded, never redirected to another host), what the service says is shown as data, and the run
dir and the shared cache, which the job writes too, are never written through a link.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import queue
import re
import shlex
import stat
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, ClassVar

from harness import config
from harness.artifacts.nodes import NodesRecord
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.errors import InfraError
from harness.outside import shown
from harness.remote import Answer, Remote, RemoteError
from harness.safeio import open_to_write, tail_bytes
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.settings.rayjob import RayJobRuntime, check_url
from harness.signals import interrupts, note_stopped
from harness.training.executors import ray_entry, ray_lease
from harness.training.executors.base import LABEL_PREFIX
from harness.training.executors.ray_cluster import RUN_ENV
from harness.training.launch import Launch, NodeRun

# verl's submit_and_wait_rayjob.sh: the payload's keys, the watch's event kinds (``type``), the final statuses
PAYLOAD_KEYS = (
    "repository", "commit_sha", "branch", "github_run_id", "github_run_attempt", "image", "name_suffix", "script",
    "args", "env", "worker_replicas", "template_patches",
)  # fmt: skip
EVENT_KINDS = ("log", "status", "final", "error")
FINAL_STATUSES = ("SUCCEEDED", "FAILED", "TIMEOUT", "NOT_FOUND")
SUBMIT_PATH, WATCH_PATH, DELETE_PATH = "/api/v1/rayjobs", "/api/v1/rayjobs/{job_id}/watch", "/api/v1/workflows/{run}"
JOBS_DIR = "harness-jobs"  # in the shared cache: each job's script and env, the run id's lock
STARTED = "harness rayjob: the training starts"  # the job script's line once its nodes are set up
REQUEST_TIMEOUT_S = 30.0
DELETE_TIMEOUT_S = 30.0
TICK_S = 1.0  # how often a stop, the deadline and Ctrl-C are looked at while the watch waits
_NAME = re.compile(r"[^a-z0-9-]+")
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")  # a Kubernetes object's name, as the submitter names jobs


@dataclass(frozen=True)
class Final:
    """How the job ended as the watch said it (``status`` one of FINAL_STATUSES), or why no end was seen."""

    status: str | None
    message: str = ""


def submitter_url(rt: RayJobRuntime) -> str:
    """SUBMITTER_URL (verl's own variable) else ``executor.rayjob.url``; InfraError in one line where neither."""
    if given := config.SUBMITTER_URL.get():
        try:
            return check_url(given)
        except ValueError as exc:
            raise InfraError(f"{config.SUBMITTER_URL.name}: {exc}") from None
    if rt.url:
        return rt.url
    raise InfraError(
        f"no RayJob submitter named: set {config.SUBMITTER_URL.name} (verl's multi-node runners do) or "
        "executor.rayjob.url"
    )


def run_id() -> str:
    """The Actions run whose RayJobs these are (GITHUB_RUN_ID); outside Actions, this harness process's own."""
    return config.GITHUB_RUN_ID.get() or f"harness-{os.getpid()}"


def name_suffix(node: NodeRun) -> str:
    """The RayJob's name suffix: the run's own dir name, as a Kubernetes name wants it (lower case, '-', 40 at
    most, its random tail kept so two runs never share one)."""
    name = _NAME.sub("-", node.root.name.lower()).strip("-")
    return name[-40:].lstrip("-")


def job_files(rt: RayJobRuntime, node: NodeRun) -> tuple[PurePosixPath, PurePosixPath]:
    """The job script and the env file of the run's actors, in the shared cache."""
    base = PurePosixPath(rt.cache) / JOBS_DIR / node.job
    return base.with_suffix(".sh"), base.with_suffix(".env.json")


def job_env(launch: Launch, rt: RayJobRuntime, node: NodeRun) -> dict[str, str]:
    """Every actor's variables: the block's, the workload's, the run's id (how its actors are found)."""
    env = {**rt.env, "PYTHONUNBUFFERED": "1", **launch.env, RUN_ENV: node.job}
    if gate := config.GATHER_GATE.text():
        env[config.GATHER_GATE.name] = gate
    return env


def job_script(launch: Launch, run: RunDir, rt: RayJobRuntime, node: NodeRun, resource: str) -> str:
    """What the RayJob runs on its head pod: every node set up (verl from the shared cache), then the harness's
    entrypoint, which runs the training and gathers every node's dumps into the run dir before the job ends."""
    _, env_file = job_files(rt, node)
    inputs = [a for p in launch.inputs for a in ("--input", str(p))]
    entry = "harness.training.executors.ray_entry"
    setup = ["python3", "-m", entry, "setup", "--verl", rt.verl_dir, "--harness", rt.harness_dir,
             "--wheels", rt.wheels_dir, "--nodes", str(node.nnodes), "--resource", resource]  # fmt: skip
    run_argv = ["python3", "-m", entry, "run", "--run", str(run.root), "--node-root", str(node.root),
                "--job", node.job, "--lease-stale-s", f"{ray_lease.STALE_S:g}", "--env-json", str(env_file),
                *inputs, "--", launch.module, *launch.args]  # fmt: skip
    return "\n".join([
        "#!/usr/bin/env bash",
        f"# written by the harness for Ray job {node.job} (executor rayjob): verl's RayJob submitter runs it on the",
        "# head pod of the job's own KubeRay cluster; the shared cache holds it, the harness, verl and the run dir",
        "set -euo pipefail",
        f"export PYTHONPATH={shlex.quote(rt.harness_dir)}${{PYTHONPATH:+:${{PYTHONPATH}}}}",
        shlex.join(setup),
        f"echo {shlex.quote(STARTED)}",
        f"cd {shlex.quote(str(run.root))}",
        "exec " + shlex.join(run_argv),
        "",
    ])  # fmt: skip


def payload(rt: RayJobRuntime, node: NodeRun, script: PurePosixPath, env: dict[str, str]) -> dict[str, Any]:
    """What verl's submit script POSTs, key for key (``PAYLOAD_KEYS``), for this run."""
    return {
        "repository": config.GITHUB_REPOSITORY.get() or "local",
        "commit_sha": config.GITHUB_SHA.get() or "unknown",
        "branch": config.GITHUB_REF_NAME.get(),
        "github_run_id": run_id(),
        "github_run_attempt": config.GITHUB_RUN_ATTEMPT.get(),
        "image": rt.image,
        "name_suffix": name_suffix(node),
        "script": str(script),
        "args": [],
        "env": env,
        "worker_replicas": rt.worker_replicas,
        "template_patches": [p.model_dump(exclude_none=False) for p in rt.template_patches],
    }


class Submitter:
    """verl's RayJob submitter service, spoken to as verl's submit script does, every call through ``Remote``: the
    POST within the run's deadline, the DELETE within its own bound (it is sent after the deadline too), no redirect
    to another host followed. What it answers is data: a job id that is not a name is refused, every field it says
    is shown as one escaped line, an event of any shape is logged as one (``_take``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.remote = Remote(url, "the RayJob submitter")
        self.closed = threading.Event()  # no further try of a watch once the executor is done with the job

    def submit(self, body: dict[str, Any], until: float) -> str:
        """POST the payload; the job's id. InfraError in one line: unreachable, stalled, non-JSON, non-2xx, no
        job_id or one that is not a name."""
        answer = self.remote.request("POST", SUBMIT_PATH, body=body, total_s=REQUEST_TIMEOUT_S, until=until)
        where = f"{self.remote.where} answered HTTP {answer.status}"
        if not answer.ok:
            doc = _json(answer)
            said = (doc.get("detail") or doc.get("message")) if isinstance(doc, dict) else None
            raise InfraError(f"{self.remote.where} refused the job: HTTP {answer.status}: "
                             f"{shown(said, 200) if said else answer.line()}")  # fmt: skip
        doc = answer.json()
        job = doc.get("job_id") if isinstance(doc, dict) else None
        if not isinstance(job, str) or not job:
            raise InfraError(f"{where} without a job_id to POST {SUBMIT_PATH}: {answer.line()}")
        if not JOB_ID.fullmatch(job):  # it goes into the watch's path: "../x" would watch something else
            raise InfraError(f"{where} a job_id that is not a job's name: '{shown(job, 200)}'")
        return job

    def events(self, job: str, retries: int, delay_s: float, read_s: float) -> Iterator[dict[str, Any]]:
        """The job's events, one dict a line, the watch resumed where it drops (``retries`` more tries, ``delay_s``
        apart), until a final event; a read waits ``read_s`` at most (the caller bounds the whole). A line that is
        not a JSON object comes as ``{"type": "raw"}`` (verl prints it as such); a watch lost past its retries ends
        with ``{"type": "lost", "message": why}``."""
        path = WATCH_PATH.format(job_id=job)
        why = ""
        for attempt in range(retries + 1):
            if attempt and self.closed.wait(delay_s):
                return
            try:
                with self.remote.lines(path, params={"format": "ndjson"}, read_s=read_s) as lines:
                    for line in lines:
                        if not line.strip():
                            continue
                        event = _event(line)
                        yield event
                        if event.get("type") == "final":
                            return
                why = "the watch ended without a final event"
            except RemoteError as exc:
                why = str(exc)
        yield {"type": "lost", "message": f"{why} (tried {retries + 1} times)"}

    def delete(self, run: str, attempt: str) -> str | None:
        """DELETE the run's every RayJob; None, or why it failed (said, never raised: it runs on every way out)."""
        try:
            answer = self.remote.request("DELETE", DELETE_PATH.format(run=run), params={"attempt": attempt},
                                         total_s=DELETE_TIMEOUT_S)  # fmt: skip
        except RemoteError as exc:
            return str(exc)
        return None if answer.ok else f"HTTP {answer.status}: {answer.line()}"

    def close(self) -> None:
        self.closed.set()
        self.remote.close()


def _json(answer: Answer) -> Any:
    """The answer's JSON, or None (a refusal's body may be anything)."""
    try:
        return answer.json()
    except RemoteError:
        return None


def _event(line: str) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return {"type": "raw", "line": line}
    return event if isinstance(event, dict) else {"type": "raw", "line": line}


def write_shared(path: Path, text: str, cache: str) -> None:
    """A file the job reads from the shared cache; a full or read-only cache is one line naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise InfraError(shared_cache_problem(exc, path, cache)) from None


def shared_cache_problem(exc: OSError, path: Path, cache: str) -> str:
    """The one line of a shared cache that cannot take a file."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "is full"
        fix = "free space there: the job script, the results dir and every node's gathered dumps lie under it"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        what = "is read-only here"
        fix = "the runner's container must mount it read-write (verl's runners mount /root/.cache)"
    else:
        what, fix = "cannot be written", "check that it is mounted"
    return f"the shared cache {cache} {what} ({exc.strerror}, writing {path}): {fix}"


class RunLock:
    """One submission at a time per run id from this shared cache: the DELETE that ends each submission removes the
    run's every RayJob, so a second scenario submitted at once under the same run would lose its job to the first's
    end. Held: one line naming who holds it.

    Its file goes with it on every way out (one a run id would pile up in the shared cache, night after night). The
    holder removes the name while it still holds the lock, so whoever opened the name before it went and then got
    the lock holds a file that no longer has the name: it finds so (``_named``) and starts again on the name's new
    file. Never opened through a link, and only a regular file."""

    def __init__(self, rt: RayJobRuntime, run: str, scenario: str) -> None:
        self.path = Path(rt.cache) / JOBS_DIR / f"run-{_NAME.sub('-', run.lower())}.lock"
        self.run, self.scenario, self.cache = run, scenario, rt.cache
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = shown(os.read(fd, 300).decode("utf-8", "replace").strip() or "another harness", 200)
                os.close(fd)
                raise InfraError(
                    f"{self.scenario}: another scenario is being submitted under run {self.run} at once ({holder}): "
                    "the DELETE that ends each submission removes the run's every RayJob; submit them one after "
                    "another (one harness session does)"
                ) from None
            if self._named(fd):
                break
            os.close(fd)  # its holder removed it as it ended: the lock is the name's new file
        os.ftruncate(fd, 0)
        os.write(fd, f"scenario {self.scenario}, pid {os.getpid()}".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            if self._named(self._fd):  # removed while held (the class docstring)
                with contextlib.suppress(OSError):  # a read-only cache keeps it: the next run takes it all the same
                    self.path.unlink()
            os.close(self._fd)  # the lock goes with it
            self._fd = None

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InfraError(f"{self.path}: a symbolic link in the shared cache: the run's lock is never opened "
                                 "through a link (remove it)") from None  # fmt: skip
            raise InfraError(shared_cache_problem(exc, self.path, self.cache)) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InfraError(f"{self.path}: not a regular file in the shared cache, where the run's lock goes (remove "
                             "it)")  # fmt: skip
        return fd

    def _named(self, fd: int) -> bool:
        """Whether the lock's name is still this open file."""
        try:
            return os.path.samestat(os.fstat(fd), os.lstat(self.path))
        except FileNotFoundError:
            return False


def _under(path: Path, cache: str) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(Path(cache))


class RayJobSubmitterExecutor:
    name: ClassVar[str] = "rayjob"

    def execute(
        self,
        launch: Launch,
        run: RunDir,
        settings: ExecutorSettingsBase,
        labels: dict[str, str],
        stop: threading.Event | None = None,
    ) -> ExecResult:
        rt: RayJobRuntime = settings.options("rayjob")
        node = launch.on_nodes("rayjob")
        if not _under(run.root, rt.cache):
            raise InfraError(
                f"the results dir {run.root} is not under the shared cache {rt.cache}: the RayJob's pods see only "
                f"that, and gather there (--results {rt.cache}/results)"
            )
        submitter = Submitter(submitter_url(rt))
        scenario = labels.get(f"{LABEL_PREFIX}.scenario", node.job)
        script, env_file = (Path(p) for p in job_files(rt, node))
        started = time.monotonic()
        until = started + settings.timeout_s
        try:
            with RunLock(rt, run_id(), scenario):
                env = job_env(launch, rt, node)
                write_shared(env_file, json.dumps(env, indent=1, sort_keys=True), rt.cache)
                write_shared(script, job_script(launch, run, rt, node, node.resource), rt.cache)
                script.chmod(0o755)
                write_shared(run.root / ray_entry.MARKER, node.job, rt.cache)
                try:
                    with ray_lease.Renewal(run.root / ray_lease.FILE), interrupts():
                        job = submitter.submit(payload(rt, node, PurePosixPath(script), env), until)
                        return self._follow(submitter, job, node, run, settings, stop or threading.Event(), started)
                except KeyboardInterrupt as exc:
                    note_stopped(exc, f"RayJob of {node.job} at {submitter.url} (its run's jobs deleted)")
                    raise
                finally:  # once a POST was tried, whatever its answer: the run's jobs deleted
                    if why := submitter.delete(run_id(), config.GITHUB_RUN_ATTEMPT.get()):
                        print(f"harness: DELETE of run {run_id()}'s RayJobs at {submitter.url} failed: {why}",
                              file=sys.stderr, flush=True)  # fmt: skip
        finally:
            submitter.close()
            for path in (script, env_file, run.root / ray_entry.MARKER):
                with contextlib.suppress(OSError):  # a read-only cache kept none of them
                    path.unlink(missing_ok=True)

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        return describe_lines(launch, run, settings)

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        rt: RayJobRuntime = settings.options("rayjob")
        return {"rayjob_image": rt.image, "rayjob_worker_replicas": rt.worker_replicas}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None  # the job's own cluster holds the devices, not this host

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        """Nothing to sweep: a killed harness's job ends on its own (its lease goes stale in the shared cache) and
        its cluster goes with it; the workflow's own clean-up step DELETEs the run's RayJobs."""
        return []

    def _follow(
        self,
        submitter: Submitter,
        job: str,
        node: NodeRun,
        run: RunDir,
        settings: ExecutorSettingsBase,
        stop: threading.Event,
        started: float,
    ) -> ExecResult:
        """The watch in a thread, its log lines into ``train.log``; this thread bounds it (the timeout, a stop,
        Ctrl-C: looked at every ``TICK_S``) and maps its end."""
        rt: RayJobRuntime = settings.options("rayjob")
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        quiet_s = max(settings.timeout_s - (time.monotonic() - started), 1.0)  # a job may be quiet that long
        events_of = submitter.events(job, rt.watch_retries, rt.retry_delay_s, quiet_s)
        watch = threading.Thread(target=_pump, args=(events_of, events), daemon=True)
        watch.start()
        final = Final(None)
        detail = f"RayJob {job} ({node.job}) at {submitter.url}"
        with open_to_write(run.log, append=True) as log:  # the job writes the run dir too: never through its link
            while final.status is None:
                if time.monotonic() - started > settings.timeout_s or stop.is_set():
                    timed_out = not stop.is_set()
                    wall = time.monotonic() - started
                    said = "timed out" if timed_out else "stopped"
                    return ExecResult(None, wall, timed_out=timed_out, stopped=not timed_out,
                                      detail=f"{detail}: {said}, the run's jobs deleted", argv=[job])  # fmt: skip
                try:
                    event = events.get(timeout=TICK_S)
                except queue.Empty:
                    continue
                final = _take(event, log)
        wall = time.monotonic() - started
        return _ended(final, job, node, run, detail, wall)


def _pump(source: Iterator[dict[str, Any]], sink: queue.Queue[dict[str, Any]]) -> None:
    for event in source:
        sink.put(event)


def _take(event: dict[str, Any], log: IO[str]) -> Final:
    """One event into the log as verl's script prints it; the end where it is one. Its fields may be of any shape
    (a server's word): each is text in the log, and a final status that is not one of verl's is said as such."""
    def field(key: str) -> str:
        return _text(event.get(key))

    kind = event.get("type")
    if kind == "log":
        log.write(f"{field('line')}\n")
    elif kind == "status":
        log.write(f"[rayjob status] status={field('status') or 'UNKNOWN'} rayjob_status={field('rayjob_status')} "
                  f"deployment_status={field('job_deployment_status')} {field('message')}\n")  # fmt: skip
    elif kind == "final":
        status = field("status") or "UNKNOWN"
        log.write(f"[rayjob final] {status} {field('message')}\n")
        log.flush()
        return Final(status, shown(field("message")) if field("message") else "")
    elif kind == "error":
        log.write(f"[rayjob error] {field('message')}\n")
    elif kind == "lost":
        log.flush()
        return Final("", field("message"))
    else:
        log.write(f"[watch raw] {field('line') if 'line' in event else _text(event)}\n")
    log.flush()
    return Final(None)


def _text(value: object) -> str:
    """An event's field as text the log can hold: a string as it is (a lone surrogate replaced), anything else as
    its JSON, None as nothing."""
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
    return text.encode("utf-8", "replace").decode("utf-8")


def _ended(final: Final, job: str, node: NodeRun, run: RunDir, detail: str, wall: float) -> ExecResult:
    """What the job's final status means (module docstring)."""
    said = f" ({final.message})" if final.message else ""
    text = tail_bytes(run.log, 1 << 16)
    if entry := [ln for ln in text.splitlines() if ln.startswith(ray_entry.ERROR)]:
        raise InfraError(f"RayJob {job}: {shown(entry[-1].removeprefix(ray_entry.ERROR).strip())}")
    if final.status == "SUCCEEDED":
        if NodesRecord.read(run.nodes) is None:  # the job's entrypoint writes it before it may succeed
            raise InfraError(f"RayJob {job} ended SUCCEEDED{said} with nothing gathered (no nodes.json in the run "
                             f"dir {run.root}): not the end of the harness's job script (train.log has the job's "
                             "log)")  # fmt: skip
        return ExecResult(0, wall, detail=f"{detail}: SUCCEEDED{said}", argv=[job])
    if final.status == "FAILED":
        if STARTED not in text:
            raise InfraError(f"RayJob {job} FAILED before its training started{said}: its cluster or set-up "
                             f"(train.log has the job's log)")  # fmt: skip
        return ExecResult(1, wall, detail=f"{detail}: FAILED{said}", argv=[job])
    if final.status == "TIMEOUT":
        raise InfraError(f"RayJob {job} ended TIMEOUT at the submitter (its own limit, not the scenario's){said}",
                         transient=True)  # fmt: skip
    if final.status == "NOT_FOUND":
        raise InfraError(f"RayJob {job} ended NOT_FOUND at the submitter: the job or its cluster is gone{said}")
    if final.status == "":
        raise InfraError(f"the watch of RayJob {job} was lost before its final status: {final.message}",
                         transient=True)  # fmt: skip
    raise InfraError(f"RayJob {job} ended '{shown(final.status, 100)}', not one of verl's "
                     f"{', '.join(FINAL_STATUSES)}{said}")  # fmt: skip


def describe_lines(launch: Launch, run: RunDir, settings: ExecutorSettingsBase) -> list[str]:
    """The dry run: the exact payload it would POST, where, and the job script."""
    rt: RayJobRuntime = settings.options("rayjob")
    node = launch.on_nodes("rayjob")
    try:
        where = submitter_url(rt)
    except InfraError:
        where = f"(none named: {config.SUBMITTER_URL.name} or executor.rayjob.url)"
    script, env_file = job_files(rt, node)
    body = payload(rt, node, script, job_env(launch, rt, node))
    return [
        f"RayJob of {node.job} POSTed to {where}{SUBMIT_PATH} ({node.nnodes} node(s) with {node.per_node} "
        f"{node.resource} each), timeout {settings.timeout_s:g}s; watched at {WATCH_PATH}?format=ndjson; "
        f"DELETE {DELETE_PATH.format(run=run_id())}?attempt={config.GITHUB_RUN_ATTEMPT.get()} on every way out",
        f"each node's own dir for this run: {node.root} (save_path {node.dumps}), gathered into {run.root} "
        + (
            f"(in the shared cache {rt.cache})"
            if _under(run.root, rt.cache)
            else f"(NOT under the shared cache {rt.cache}: a run refuses it; --results {rt.cache}/results)"
        ),
        "payload:",
        *(f"  {line}" for line in json.dumps(body, indent=2).splitlines()),
        f"job script {script} (the actors' env in {env_file}):",
        *(f"  {line}" for line in job_script(launch, run, rt, node, node.resource).splitlines()),
    ]
