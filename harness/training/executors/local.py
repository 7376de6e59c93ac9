"""Local executor: the training runs as a child process group of the harness."""

from __future__ import annotations

import contextlib
import fnmatch
import grp
import hashlib
import importlib.metadata
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import psutil

from harness import config
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.errors import InfraError
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.settings.local import LocalRuntime
from harness.signals import interrupts, note_stopped
from harness.training.executors.base import ENV_ALLOWLIST, LABEL_PREFIX
from harness.training.launch import Launch, argv_lines
from harness.training.watchdog import MODULE, watched

POLL_S = 0.2  # how soon a stop request is acted on
KILL_GRACE_S = 10


def _env(launch: Launch, settings: ExecutorSettingsBase | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    rt: LocalRuntime | None = settings.options("local") if settings is not None else None
    if rt is not None:
        env.update({k: v for k, v in os.environ.items() if any(fnmatch.fnmatchcase(k, p) for p in rt.pass_env)})
        env.update(rt.env)
    return env | {"PYTHONUNBUFFERED": "1", **launch.env}  # the harness's own variables win


def _name(lookup: Any, num: int) -> str:
    try:
        return str(lookup(num)[0])
    except KeyError:  # a uid or gid without an entry (a CI container started with --user N)
        return str(num)


def user_line() -> str:
    """Who the training runs as, and whether it can open the NPU device nodes (group HwHiAiUser on a runner)."""
    uid = os.getuid()
    groups = ",".join(sorted({_name(grp.getgrgid, g) for g in {os.getgid(), *os.getgroups()}}))
    nodes = sorted(str(p) for p in Path("/dev").glob("davinci*"))
    if not nodes:
        npus = "no /dev/davinci* here"
    elif blocked := [n for n in nodes if not os.access(n, os.R_OK | os.W_OK)]:
        npus = f"cannot open {', '.join(blocked)}"
    else:
        npus = f"can open {', '.join(nodes)}"
    return f"user: uid {uid} ({_name(pwd.getpwuid, uid)}), groups {groups}: {npus}"


class LocalExecutor:
    name: ClassVar[str] = "local"

    def execute(
        self,
        launch: Launch,
        run: RunDir,
        settings: ExecutorSettingsBase,
        labels: dict[str, str],
        stop: threading.Event | None = None,
    ) -> ExecResult:
        argv = launch.argv(launch.python or sys.executable)  # the target's environment, else the harness's own
        if shutil.which(argv[0]) is None:
            raise InfraError(f"cannot start {argv[0]}: not an executable file")
        started = time.monotonic()
        alive, harness_alive = os.pipe()  # the watchdog reads end-of-file once this process is gone (SIGKILLed)
        with run.log.open("wb") as log, interrupts(), _closing(harness_alive):
            try:
                proc = subprocess.Popen(
                    watched(sys.executable, f"fd:{alive}", argv),
                    cwd=launch.workdir,
                    env=_env(launch, settings),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: Ctrl-C in a terminal reaches the harness only
                    pass_fds=(alive,),
                )
            except OSError as exc:
                raise InfraError(f"cannot start {sys.executable}: {exc}") from exc
            finally:
                os.close(alive)
            try:
                while (code := _wait(proc, POLL_S)) is None:
                    timed_out = time.monotonic() - started > settings.timeout_s
                    if timed_out or (stop is not None and stop.is_set()):
                        _kill_group(proc)
                        return ExecResult(
                            proc.returncode,
                            time.monotonic() - started,
                            timed_out=timed_out,
                            stopped=not timed_out,
                            argv=argv,
                        )
                _kill_group(proc)  # the ranks, should the leader have gone first
                return ExecResult(exit_code=code, wall_s=time.monotonic() - started, argv=argv)
            except BaseException as exc:  # a signal or an error in the harness: never leave a training behind
                note_stopped(exc, f"{_who(labels)} (local process group {proc.pid})")
                _kill_group(proc)
                raise

    def describe(
        self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict[str, str]
    ) -> list[str]:
        return [
            f"local process in {launch.workdir}",
            user_line(),
            "env:",
            *(f"  {k}={v}" for k, v in sorted(_env(launch, settings).items())),
            "argv:",
            *argv_lines(launch.argv(launch.python or sys.executable)),
            f"under its watchdog (ends it when the harness is gone): {sys.executable} -I -m {MODULE}",
        ]

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"packages_dir": packages_dir} if packages_dir else {}
        if image := config.JOB_IMAGE.get():
            out["image"] = image_identity(image)
        return out

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        return []  # a local training dies with its harness's cleanup; one of a SIGKILLed harness is not labelled


@contextlib.contextmanager
def _closing(fd: int) -> Iterator[None]:
    """Hold ``fd`` (the harness's end of its training's watchdog pipe) until the training is over."""
    try:
        yield
    finally:
        os.close(fd)


# what a CI job installs into the image itself (the verl under test, msprobe, the harness): not the image's
_INSTALLED_BY_THE_JOB = {"verl", "mindstudio-probe", "verl-msprobe-harness"}


def image_identity(ref: str) -> str:
    """The image a local run ran inside, as a series keys it: the reference the workflow names and a fingerprint of
    what the image holds (every installed distribution and version but what the job itself installs, and CANN's
    version file where ASCEND_TOOLKIT_HOME names one). verl rebuilds its Ascend ``:latest`` daily: the tag alone is
    the same string every night, and a new torch_npu or CANN in it would read as verl's change."""
    held = sorted(
        f"{d.metadata['Name']}=={d.version}".lower() for d in importlib.metadata.distributions()
        if d.metadata["Name"] and d.metadata["Name"].lower() not in _INSTALLED_BY_THE_JOB
    )  # fmt: skip
    toolkit = os.environ.get("ASCEND_TOOLKIT_HOME", "")
    for name in ("version.cfg", "version.info"):
        found = Path(toolkit, name) if toolkit else None
        if found is not None and found.is_file():
            held.append(found.read_text(errors="replace"))
    digest = hashlib.sha256("\n".join(held).encode()).hexdigest()[:12]
    return f"{ref} (content {digest})"


def _who(labels: dict[str, str]) -> str:
    scenario, mode = (labels.get(f"{LABEL_PREFIX}.{k}", "?") for k in ("scenario", "run"))
    return f"the {mode} training of {scenario}"


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def _members(pid: int) -> list[psutil.Process]:
    """The training's processes: its descendants, and every process of its session (Ray's workers start
    process groups of their own, and a process whose parent died is re-parented, but none leaves the session)."""
    try:
        found = {p.pid: p for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        found = {}
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid != pid and os.getsid(p.pid) == pid:
                found.setdefault(p.pid, p)
    return list(found.values())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL, to the training's process group and to every process of its session found before
    (Ray's workers start process groups of their own); done once the leader and those are gone. A second signal
    meanwhile hurries on to SIGKILL and is raised once they are gone."""
    members = _members(proc.pid)
    interrupted: KeyboardInterrupt | None = None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            for p in members:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.send_signal(sig)
            _wait(proc, KILL_GRACE_S)
            if not psutil.wait_procs(members, timeout=KILL_GRACE_S)[1]:
                break
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted:
        raise interrupted
