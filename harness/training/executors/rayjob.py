"""RayJob executor: each training submitted the way verl's Ascend multi-node nightly submits its jobs
(``.github/workflows/nightly_ascend_multinode.yml``, its ``submit_and_wait_rayjob.sh``), to an in-cluster RayJob
submitter service that makes a fresh KubeRay cluster for the job and tears it down afterwards.

The protocol, as verl's script speaks it: ``POST $SUBMITTER_URL/api/v1/rayjobs`` with a JSON payload (``PAYLOAD_KEYS``:
repository, commit, branch, run id and attempt, image, a name suffix, the script and its args, env, the worker pods,
RFC 6902 patches of the RayJob's template) answers ``{"job_id": ...}``; ``GET .../rayjobs/{job_id}/watch?format=ndjson``
streams one JSON event a line (``EVENT_KINDS``: a log line, a status, the final status, an error), the final one of
``FINAL_STATUSES``; ``DELETE .../api/v1/workflows/{run id}?attempt=N`` removes every RayJob POSTed under that run id
and attempt, the narrowest thing the protocol deletes.

So each training is POSTed under a run id of its own (``run_id``: the Actions run's id and the job's random tail):
its DELETE, sent on every way out (success, failure, timeout, a stop, an exception, Ctrl-C), removes that job only,
never another training's, another scenario's, nor a RayJob of a workflow the harness runs inside (verl's own nightly
DELETEs its GITHUB_RUN_ID: the harness never POSTs under it). The name suffix is as short as verl's (13 characters:
KubeRay names its objects with DNS-1035 labels of 47 at most, the submitter's prefix included), the commit is the
verl under test's, the image verl's ``IMAGE`` where set, and the env is empty, as verl's nightly sends it: the job
reads its variables from a file it checks (``rayjob_files``), so nothing of a scenario's env reaches the submitter.

The watch, as verl's loop reads it: a stream that breaks (unreachable, an HTTP error, a read silent for
``watch_read_s``: a dead connection, a cut) is opened again ``retry_delay_s`` later, ``watch_retries`` times in a row
at most, a line read between two breaks starting the count again (verl: curl --retry 5 --retry-delay 10
--retry-all-errors); a stream that ends cleanly is the end (verl's loop
then fails a job that sent no final event); lines after a final event are still read, until the stream ends or
``FINAL_GRACE_S`` pass (verl reads to the end: the last final stands). The whole is bounded by the scenario's timeout.

A node's disk goes with its cluster, so the job gathers inside the job: the job script (``rayjob_files``: a directory
of the training's own in the shared cache, which the runner's container and every pod see at the same path, every
file checked before use) sets every node up from the training's bundle (the verl under test installed not editable,
msprobe's wheels, the harness), runs the harness's Ray entrypoint (``ray_entry``), which runs the training and gathers
every node's dumps per node and rank into the run dir in the shared cache (``nodes.json``) before the job ends.

What an end means: SUCCEEDED is exit 0; FAILED is the training's failure (its traceback, streamed into ``train.log``,
tells the crash classifier whose code failed: a verdict on verl where it is verl's), unless the job's own entrypoint
failed (its ``HARNESS RAY ERROR:`` line) or the training never started (the pods, the image, the set-up: no
``STARTED`` line in the stream, wherever in a log of any length): infrastructure; TIMEOUT (the service's own limit)
and NOT_FOUND, a submitter that answers non-2xx or non-JSON, a watch lost past its retries or ended without a final
event: infrastructure, one line each; past the scenario's timeout, a timeout, as on one host. SUCCEEDED is the
service's word: a job that gathered nothing (no ``nodes.json``) is the infrastructure's, never a verdict on verl.

The service and the shared cache are outside the harness (docs/security.md): every call goes through
``harness.remote`` (bounded, never redirected to another host), what the service says is shown as data, and the run
dir and the shared cache, which the job writes too, are never written through a link.
"""

from __future__ import annotations

import json
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from harness import config
from harness.artifacts.nodes import NodesRecord
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.errors import InfraError
from harness.outside import shown
from harness.remote import Answer, Redirected, Remote, RemoteError
from harness.safeio import open_to_write
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.settings.rayjob import RayJobRuntime, check_url
from harness.signals import deferred, interrupts, note_stopped
from harness.training.executors import ray_entry, ray_lease, rayjob_files
from harness.training.executors.rayjob_files import STARTED, RunFiles
from harness.training.launch import Launch, NodeRun

# verl's submit_and_wait_rayjob.sh: the payload's keys, the watch's event kinds (``type``), the final statuses
PAYLOAD_KEYS = (
    "repository", "commit_sha", "branch", "github_run_id", "github_run_attempt", "image", "name_suffix", "script",
    "args", "env", "worker_replicas", "template_patches",
)  # fmt: skip
EVENT_KINDS = ("log", "status", "final", "error")
FINAL_STATUSES = ("SUCCEEDED", "FAILED", "TIMEOUT", "NOT_FOUND")
SUBMIT_PATH, WATCH_PATH, DELETE_PATH = "/api/v1/rayjobs", "/api/v1/rayjobs/{job_id}/watch", "/api/v1/workflows/{run}"
REQUEST_TIMEOUT_S = 30.0
DELETE_BUDGET_S = 20.0  # the DELETE's tries in all, on a run's ordinary end
# after a signal: the runner gives a cancelled step 7.5 s after SIGINT, 2.5 s more after SIGTERM, then SIGKILL
DELETE_ON_SIGNAL_S = 4.0
DELETE_RETRY_S = 1.0
FINAL_GRACE_S = 10.0  # lines after a final event, read this long at most
TICK_S = 1.0  # how often a stop, the deadline and Ctrl-C are looked at while the watch waits
NAME_SUFFIX = re.compile(r"[a-z]([-a-z0-9]{0,11}[a-z0-9])?")  # a DNS-1035 label, verl's length (13) at most
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")  # a Kubernetes object's name, as the submitter names jobs
_END = {"type": "end"}  # the watch's stream is over (the pump's last word)


@dataclass(frozen=True)
class Final:
    """How the job ended as the watch said it (``status`` one of FINAL_STATUSES), or why no end was seen."""

    status: str | None
    message: str = ""


@dataclass
class Watched:
    """What the stream said that decides whose an end is, as it came (never read back from the log's tail)."""

    started: bool = False  # the job script's STARTED line: the nodes were set up, the training began
    entry_error: str | None = None  # the last ``HARNESS RAY ERROR:`` line
    final: Final | None = None


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


def image(rt: RayJobRuntime) -> str:
    """IMAGE (verl's own variable: the workflow's image input) else ``executor.rayjob.image``."""
    return config.IMAGE.get() or rt.image


def _tail(node: NodeRun) -> tuple[str, str]:
    """The run's mode and the first 6 hex digits of its random tail (``NodeRun.new``: scenario-mode-xxxxxxxx)."""
    _, mode, tail = node.root.name.rsplit("-", 2)
    return mode, tail[:6]


def run_id(node: NodeRun) -> str:
    """The run id this training's RayJob is POSTed and DELETEd under: the Actions run's (GITHUB_RUN_ID; ``local``
    outside Actions) and the job's own tail, so the DELETE removes this job only (module docstring)."""
    return f"{config.GITHUB_RUN_ID.get() or 'local'}-{_tail(node)[1]}"


def name_suffix(node: NodeRun) -> str:
    """The RayJob's name suffix: ``pd-MODE-XXXXXX``, 13 characters at most as verl's ``multinode-e2e`` (module
    docstring), a DNS-1035 label."""
    mode, tail = _tail(node)
    return f"pd-{mode[:3]}-{tail}"


def commit(launch: Launch) -> str:
    """The commit of the verl under test; GITHUB_SHA where it has none (a wheel, a release)."""
    pkg = launch.verl
    return (pkg.commit if pkg is not None and pkg.commit else None) or config.GITHUB_SHA.get() or "unknown"


def payload(launch: Launch, rt: RayJobRuntime, node: NodeRun, files: RunFiles | None) -> dict[str, Any]:
    """What verl's submit script POSTs, key for key (``PAYLOAD_KEYS``), for this training; ``files`` None: the dry
    run's, with stand-ins for the digests it does not make."""
    script, digest = rayjob_files.payload_script(files, rt, node)
    return {
        "repository": config.GITHUB_REPOSITORY.get() or "local",
        "commit_sha": commit(launch),
        "branch": config.GITHUB_REF_NAME.get(),
        "github_run_id": run_id(node),
        "github_run_attempt": config.GITHUB_RUN_ATTEMPT.get(),
        "image": image(rt),
        "name_suffix": name_suffix(node),
        "script": str(script),
        "args": [digest],
        "env": {},
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

    def events(self, job: str, rt: RayJobRuntime) -> Iterator[dict[str, Any]]:
        """The job's events, one dict a line, until the stream ends (module docstring: a break is tried again, a clean
        end is the end). A line that is not a JSON object comes as ``{"type": "raw"}`` (verl prints it as such); a
        watch lost past its retries ends with ``{"type": "lost", "message": why}``, one that ended without a final
        event with ``{"type": "lost", ...}`` too."""
        path = WATCH_PATH.format(job_id=job)
        failures, final = 0, False
        while True:
            try:
                with self.remote.lines(path, params={"format": "ndjson"}, read_s=rt.watch_read_s) as lines:
                    for line in lines:
                        failures = 0  # the watch goes on: a break before this one is behind it
                        if not line.strip():
                            continue
                        event = _event(line)
                        final = final or event.get("type") == "final"
                        yield event
                if not final:
                    yield {"type": "lost", "message": "the watch ended without a final event (verl's loop fails such "
                                                      "a job)"}  # fmt: skip
                return
            except RemoteError as exc:
                if final:  # the end was said: what broke after it is lines lost, not the job
                    return
                failures += 1
                if failures > rt.watch_retries:
                    yield {"type": "lost", "message": f"{exc} (tried {failures} times in a row)"}
                    return
            if self.closed.wait(rt.retry_delay_s):
                return

    def delete(self, run: str, attempt: str, budget_s: float) -> str | None:
        """DELETE the RayJobs POSTed under ``run`` (this training's alone); None, or why it failed, said, never raised
        (it runs on every way out). Tried again ``DELETE_RETRY_S`` apart until ``budget_s`` is spent where the
        service may answer otherwise the next time (unreachable, stalled, a 5xx); a 4xx and a redirect to another
        host are final."""
        until = time.monotonic() + budget_s
        path = DELETE_PATH.format(run=run)
        tries, why = 0, ""
        while True:
            tries += 1
            try:
                answer = self.remote.request("DELETE", path, params={"attempt": attempt}, total_s=REQUEST_TIMEOUT_S,
                                             until=until)  # fmt: skip
                if answer.ok:
                    return None
                why, again = f"HTTP {answer.status}: {answer.line()}", answer.server_failed
            except RemoteError as exc:
                why, again = str(exc), not isinstance(exc, Redirected)
            if not again or time.monotonic() + DELETE_RETRY_S >= until:
                return f"{why} ({tries} {'try' if tries == 1 else 'tries'} within {budget_s:g} s)"
            time.sleep(DELETE_RETRY_S)

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
        started = time.monotonic()
        until = started + settings.timeout_s
        interrupted = False
        try:
            files = rayjob_files.make(launch, run, rt, node)
            _write_marker(run, node)
            posted = rayjob_files.Posted(run_id=run_id(node), attempt=config.GITHUB_RUN_ATTEMPT.get(),
                                         submitter=submitter.url, name_suffix=name_suffix(node))  # fmt: skip
            _record(posted, run)
            try:
                with ray_lease.Renewal(run.root / ray_lease.FILE), interrupts():
                    job = submitter.submit(payload(launch, rt, node, files), until)
                    _record(posted.model_copy(update={"job_id": job}), run)
                    return self._follow(submitter, job, node, run, settings, stop or threading.Event(), started)
            except KeyboardInterrupt as exc:
                interrupted = True
                note_stopped(exc, f"RayJob of {node.job} at {submitter.url} (its DELETE sent)")
                raise
            finally:  # once a POST was tried, whatever its answer: this training's job deleted, a second signal waits
                with deferred():
                    budget = DELETE_ON_SIGNAL_S if interrupted else DELETE_BUDGET_S
                    if why := submitter.delete(run_id(node), config.GITHUB_RUN_ATTEMPT.get(), budget):
                        print(f"harness: DELETE of RayJob run {run_id(node)} at {submitter.url} failed: {why}",
                              file=sys.stderr, flush=True)  # fmt: skip
        finally:
            submitter.close()
            with deferred():
                for left in (rayjob_files.remove(rayjob_files.run_dir(rt, node)), _remove(run.root / ray_entry.MARKER)):
                    if left:
                        print(f"harness: {left}", file=sys.stderr, flush=True)

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        return describe_lines(launch, run, settings)

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        rt: RayJobRuntime = settings.options("rayjob")
        return {"rayjob_image": image(rt), "rayjob_worker_replicas": rt.worker_replicas}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None  # the job's own cluster holds the devices, not this host

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        """The shared caches' directories of trainings whose harness was killed outright, once older than a day
        (``rayjob_files.sweep``). Their jobs ended on their own: a lease that goes stale stops the training, and the
        set-up waits for none that is not renewed."""
        caches = {s.options("rayjob").cache for s in settings if s.kind == "rayjob"}
        return [line for cache in sorted(caches) for line in rayjob_files.sweep(cache)]

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
        Ctrl-C: looked at every ``TICK_S``; after a final event, ``FINAL_GRACE_S``) and maps its end."""
        rt: RayJobRuntime = settings.options("rayjob")
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        watch = threading.Thread(target=_pump, args=(submitter.events(job, rt), events), daemon=True)
        watch.start()
        seen, grace_until = Watched(), None
        detail = f"RayJob {job} ({node.job}) at {submitter.url}"
        with open_to_write(run.log, append=True) as log:  # the job writes the run dir too: never through its link
            while True:
                now = time.monotonic()
                if now - started > settings.timeout_s or stop.is_set():
                    timed_out = not stop.is_set()
                    said = "timed out" if timed_out else "stopped"
                    return ExecResult(None, now - started, timed_out=timed_out, stopped=not timed_out,
                                      detail=f"{detail}: {said}, its job deleted", argv=[job])  # fmt: skip
                if grace_until is not None and now > grace_until:
                    break
                try:
                    event = events.get(timeout=TICK_S)
                except queue.Empty:
                    continue
                if event is _END:
                    break
                _take(event, log, seen)
                if event.get("type") == "lost":
                    break
                if seen.final is not None and grace_until is None:
                    grace_until = time.monotonic() + FINAL_GRACE_S
        return _ended(seen, job, run, detail, time.monotonic() - started)


def _write_marker(run: RunDir, node: NodeRun) -> None:
    """The run dir's proof that the job sees it (``ray_entry``): the job's id, in the shared cache, never through a
    link the job left there."""
    with open_to_write(run.root / ray_entry.MARKER) as f:
        f.write(node.job)


def _record(posted: rayjob_files.Posted, run: RunDir) -> None:
    """rayjob.json in the run dir (``rayjob_files.Posted``): before the POST, again once the job has its id."""
    posted.write(run.root / posted.FILE)


def _remove(path: Path) -> str | None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        return f"{path} is left in the shared cache: {exc.strerror}"
    return None


def _pump(source: Iterator[dict[str, Any]], sink: queue.Queue[dict[str, Any]]) -> None:
    try:
        for event in source:
            sink.put(event)
    finally:
        sink.put(_END)


def _take(event: dict[str, Any], log: IO[str], seen: Watched) -> None:
    """One event into the log as verl's script prints it, and into ``seen`` where it decides an end. Its fields may
    be of any shape (a server's word): each is text in the log, and a final status that is not one of verl's is
    said as such."""

    def field(key: str) -> str:
        return _text(event.get(key))

    kind = event.get("type")
    if kind == "log":
        line = field("line")
        log.write(f"{line}\n")
        if line == STARTED:
            seen.started = True
        elif line.startswith(ray_entry.ERROR):
            seen.entry_error = line.removeprefix(ray_entry.ERROR).strip()
    elif kind == "status":
        log.write(f"[rayjob status] status={field('status') or 'UNKNOWN'} rayjob_status={field('rayjob_status')} "
                  f"deployment_status={field('job_deployment_status')} {field('message')}\n")  # fmt: skip
    elif kind == "final":
        status = field("status") or "UNKNOWN"
        log.write(f"[rayjob final] {status} {field('message')}\n")
        seen.final = Final(status, shown(field("message")) if field("message") else "")  # the last one stands
    elif kind == "error":
        log.write(f"[rayjob error] {field('message')}\n")
    elif kind == "lost":
        seen.final = Final("", field("message"))
    else:
        log.write(f"[watch raw] {field('line') if 'line' in event else _text(event)}\n")
    log.flush()


def _text(value: object) -> str:
    """An event's field as text the log can hold: a string as it is (a lone surrogate replaced), anything else as
    its JSON, None as nothing."""
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
    return text.encode("utf-8", "replace").decode("utf-8")


def _ended(seen: Watched, job: str, run: RunDir, detail: str, wall: float) -> ExecResult:
    """What the job's final status means (module docstring)."""
    final = seen.final or Final("", "the watch ended without a final event (verl's loop fails such a job)")
    said = f" ({final.message})" if final.message else ""
    if seen.entry_error is not None:
        raise InfraError(f"RayJob {job}: {shown(seen.entry_error)}")
    if final.status == "SUCCEEDED":
        if NodesRecord.read(run.nodes) is None:  # the job's entrypoint writes it before it may succeed
            raise InfraError(f"RayJob {job} ended SUCCEEDED{said} with nothing gathered (no nodes.json in the run "
                             f"dir {run.root}): not the end of the harness's job script (train.log has the job's "
                             "log)")  # fmt: skip
        return ExecResult(0, wall, detail=f"{detail}: SUCCEEDED{said}", argv=[job])
    if final.status == "FAILED":
        if not seen.started:
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
    """The dry run: the exact payload it would POST (the digests of what it does not build stood in for), where, and
    the job script; the actors' variables by name only (a scenario's env may hold what only the job should read)."""
    rt: RayJobRuntime = settings.options("rayjob")
    node = launch.on_nodes("rayjob")
    try:
        where = submitter_url(rt)
    except InfraError:
        where = f"(none named: {config.SUBMITTER_URL.name} or executor.rayjob.url)"
    body = payload(launch, rt, node, None)
    here = rayjob_files.run_dir(rt, node)
    env = sorted(rayjob_files.job_env(launch, rt, node))
    return [
        f"RayJob of {node.job} POSTed to {where}{SUBMIT_PATH} ({node.nnodes} node(s) with {node.per_node} "
        f"{node.resource} each) under run id {run_id(node)}, timeout {settings.timeout_s:g}s; watched at "
        f"{WATCH_PATH}?format=ndjson; DELETE {DELETE_PATH.format(run=run_id(node))}?attempt="
        f"{config.GITHUB_RUN_ATTEMPT.get()} on every way out (this job only)",
        f"each node's own dir for this run: {node.root} (save_path {node.dumps}), gathered into {run.root} "
        + (
            f"(in the shared cache {rt.cache})"
            if _under(run.root, rt.cache)
            else f"(NOT under the shared cache {rt.cache}: a run refuses it; --results {rt.cache}/results)"
        ),
        f"the training's files in the shared cache, removed as it ends: {here}/ ({rayjob_files.SCRIPT}, "
        f"{rayjob_files.ENV}: {', '.join(env)} (values not shown), {rayjob_files.BUNDLE}: the harness, "
        f"{_verl_line(launch)}, the wheels of {rt.wheels_dir})",
        "payload:",
        *(f"  {line}" for line in json.dumps(body, indent=2).splitlines()),
        f"job script {here / rayjob_files.SCRIPT}:",
        *(f"  {line}" for line in rayjob_files.job_script(launch, run, rt, node, {}).splitlines()),
    ]


def _verl_line(launch: Launch) -> str:
    pkg = launch.verl
    if pkg is None:
        return "no verl (the image's own)"
    if version := rayjob_files.verl_version(launch):
        return f"no verl (the image's own must be verl=={version})"
    return f"{pkg.identity} (installed on every node, not editable)"

