"""No training outlives its harness: a watchdog in the training's own session (under the docker executor, in its
container) ends it when the harness is gone.

The executor starts ``python -I -m harness.training.watchdog ALIVE -- ARGV...`` instead of the training: the watchdog
leads the session, starts the training as its child and waits beside it on ALIVE, the read end of a pipe (``fd:N``,
the local executor) or a FIFO in the run dir (``fifo:PATH``, bind-mounted into the container) that only the harness
holds open for writing. A harness that is SIGKILLed (or whose whole CI job is) runs no cleanup of its own, but the
kernel closes what it held: ALIVE reads end-of-file, and the watchdog ends every process of its session, SIGTERM
then SIGKILL after a grace. Ray's daemons start process groups of their own (a process-group kill misses them) and
are re-parented when their parent dies (a parent-death signal reaches only the first child), but none leaves the
session. In a container the training gone, the watchdog ends, docker-init with it, and the container stops (the next
session's sweep removes it). While the harness lives, the watchdog forwards SIGTERM, SIGINT and SIGHUP to the
training (docker's init signals its child only) and ends as the training ended: its exit code, or the same signal.

Every Ray cluster a training starts asks for a token of its own (``ray_auth``): the watchdog starts the training
with Ray's token authentication on and a fresh token in its environment only, which the training's Ray daemons and
workers inherit; the harness never holds it, so it is in no record, no description and no log of the harness.

Stdlib only and nothing else of the harness imported: it runs under the harness's own interpreter locally, and under
the image's in a container, beside every workload.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import select
import signal
import subprocess
import sys
import time

GRACE_S = 10.0  # SIGTERM -> SIGKILL for the session's processes once the harness is gone
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
MODULE = "harness.training.watchdog"
NOT_STARTED = 127  # the training's exit where it could not be started, as a shell's (no verdict: read as any exit)


def watched(python: str, alive: str, argv: list[str]) -> list[str]:
    """``argv`` run under its watchdog, started by ``python`` (the harness's own, or the image's)."""
    return [python, "-I", "-m", MODULE, alive, "--", *argv]


def unwatched(argv: list[str]) -> list[str]:
    """The training's own argv in :func:`watched`'s (what run.json and a dry run show), ``argv`` when it is not."""
    return argv[6:] if argv[1:4] == ["-I", "-m", MODULE] and argv[5:6] == ["--"] else argv


def ray_auth(environ: dict[str, str]) -> dict[str, str]:
    """The training's environment: Ray's token authentication (``RAY_AUTH_MODE=token``, Ray 2.52 on; an older Ray
    ignores it) with a fresh token (never printed, never in a file: with none given, Ray 2.60 would write one into
    ``~/.ray/auth_token``), unless the training joins a cluster of someone else's (``RAY_ADDRESS``: that cluster's
    token is the one to send) or a token is given already."""
    if "RAY_ADDRESS" in environ or "RAY_AUTH_TOKEN" in environ or "RAY_AUTH_MODE" in environ:
        return environ
    return {**environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def session(sid: int) -> list[int]:
    """The processes of session ``sid`` but this one and an init (pid 1: docker-init in a container), from /proc."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, os.getpid()):
            with contextlib.suppress(OSError):
                if os.getsid(int(name)) == sid:
                    out.append(int(name))
    return out


def end_session(child: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """SIGTERM to every process of this session, SIGKILL to those left after ``grace_s``; returns once none is
    left but zombies (the training, ``child``, reaped meanwhile)."""
    sid = os.getsid(0)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session(sid):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            child.poll()
            if all(_zombie(p) for p in session(sid)):
                return
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] == b"Z"
    except (OSError, IndexError):
        return True  # gone


def _open(alive: str) -> int:
    kind, _, where = alive.partition(":")
    if kind == "fd":
        return int(where)
    if kind == "fifo":  # the harness holds it open before the container starts: none writing is a harness gone
        return os.open(where, os.O_RDONLY | os.O_NONBLOCK)
    raise SystemExit(f"{MODULE}: ALIVE is fd:N or fifo:PATH, got {alive!r}")


def _exit_as(code: int) -> None:
    """Leave as the training left: its exit code, or killed by the same signal (no core file of this process)."""
    if code >= 0:
        sys.exit(code)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(OSError):  # SIGKILL (the OOM killer's) has no handler to reset
        signal.signal(-code, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
    os.kill(os.getpid(), -code)
    sys.exit(128 - code)  # a signal whose default is not to end a process


def main(args: list[str]) -> None:
    if "--" not in args or args.index("--") != 1 or len(args) < 3:
        raise SystemExit(f"usage: python -m {MODULE} fd:N|fifo:PATH -- ARGV...")
    alive = _open(args[0])
    with contextlib.suppress(OSError):  # a container's: docker-init's child leads no session yet (locally it does)
        os.setsid()
    woken, wake = os.pipe()  # a signal (the child's end, one to forward) wakes the wait below
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        # inherits the session, the environment (with a Ray token of its own) and the working directory
        child = subprocess.Popen(args[2:], env=ray_auth(dict(os.environ)))
    except OSError as exc:
        print(f"{MODULE}: cannot start {args[2]}: {exc.strerror}", file=sys.stderr)
        sys.exit(NOT_STARTED)

    def forward(sig: int, _: object) -> None:
        if child.poll() is None:
            child.send_signal(sig)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while (code := child.poll()) is None:
        ready, _, _ = select.select([alive, woken], [], [])
        if woken in ready:
            os.read(woken, 512)
        if alive in ready and not os.read(alive, 512):  # end-of-file: the harness is gone
            print(f"{MODULE}: the harness is gone: ending the training (session {os.getsid(0)})", file=sys.stderr)
            end_session(child)
            code = child.wait()
            break
    _exit_as(code)


if __name__ == "__main__":
    main(sys.argv[1:])
