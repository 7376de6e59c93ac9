"""Run a target's own code (its build backend, the probes that import it) where it cannot write anything shared.

A pull request's verl runs its build backend and import-time code while its environment is made and probed. As
root (CI runners, containers) that code would own every file of the host: other targets' cached environments,
the harness, its caches. Here it runs as an unprivileged uid of its own (one per environment: a process left
behind by one target cannot write the next one's files), with no supplementary groups, ``no_new_privs`` (a
setuid binary such as sudo gives nothing back), a scrubbed environment (no runner tokens), in a network
namespace of its own (no network at all: builds are ``--no-deps``, nothing is downloaded) and a mount namespace
where every directory others may not enter (root's home, pytest's 0700 temp dirs) is an empty tmpfs with only what
the call needs bound back: the interpreter, the project venv, the harness, the target's files. It may write only
what it is given (``writable``: chowned to it for the call) and a private home.

Needs root (namespaces, the uid change). Run as another user, the harness runs these steps as that user: what
that account may write, the target's code may write too (docs/security.md).

``python -m harness.targets.sandbox UID SPEC_JSON`` is the in-namespace half: started by ``run`` in the harness's own
interpreter, it sets up the namespaces, drops to UID and execs the command.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Required, TypedDict

import psutil

from harness.errors import InfraError

UID_BASE = 1 << 20  # above every range distributions hand out (regular users, systemd's dynamic ones < 65536)
CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_BIND, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x1000, 0x4000, 1 << 18, 0x2, 0x4
PR_SET_NO_NEW_PRIVS = 38
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
KEEP_PREFIXES = ("UV_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def available() -> bool:
    """Namespaces and uid changes need root (the harness as another user runs the steps as that user)."""
    return os.geteuid() == 0 and sys.platform == "linux"


def uid_for(key: str) -> int:
    """The uid of one environment's sandbox: its own, from the environment's key (16 hex digits)."""
    return UID_BASE + int(key[:6], 16)


class Jail(TypedDict, total=False):
    """Where a call runs (``run``): the sandbox user of ``key`` (an environment's), the dirs it may read and write,
    whether it reaches the network, and variables of its own."""

    key: Required[str]
    readable: list[Path]
    writable: list[Path]
    network: bool
    env: dict[str, str]


def run(
    argv: list[str], jail: Jail, *, what: str, cwd: Path | None = None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``argv`` as the sandbox user of ``jail``'s key; its ``writable`` dirs are its own for the call, ``readable``
    ones are bound back where a directory on their path is closed to others; ``env``: variables of the call's own
    (over the scrubbed environment). Without root: as the harness's user."""
    key, readable, writable = jail["key"], jail.get("readable", []), jail.get("writable", [])
    network, given = jail.get("network", False), jail.get("env") or {}
    home = Path(tempfile.mkdtemp(prefix="harness-sandbox-"))
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV or k.startswith(KEEP_PREFIXES)}
    env.pop("UV_CACHE_DIR", None)  # the harness user's: uv caches in the private home instead
    # a user name too: the sandbox uid has no passwd entry, and getpass.getuser() (torch's cache dirs at import)
    # raises without one
    env |= {"HOME": str(home), "TMPDIR": str(home), "USER": "harness-sandbox", "LOGNAME": "harness-sandbox", **given}
    try:
        if not available():
            return _call(argv, env, cwd, timeout, what)
        uid = uid_for(key)
        for path in [home, *writable]:
            own(path, uid)
        paths = [*_interpreter_paths(), *_uv_folders(env), *readable, *writable, home]
        spec = {
            "argv": argv,
            "env": env,
            "cwd": str(cwd or home),
            "paths": sorted({str(p.resolve()) for p in paths}),
            "network": network,
        }
        return _call(
            [sys.executable, "-m", "harness.targets.sandbox", str(uid), json.dumps(spec)], env, None, timeout, what
        )
    finally:
        if available():
            _end_processes(uid_for(key))
            for path in writable:
                own(path, 0)
        shutil.rmtree(home, ignore_errors=True)


def _call(
    argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float, what: str
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout,
            start_new_session=True,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"{what}: {exc}") from None


UV_SOURCES = ("UV_FIND_LINKS", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_INDEX")


def _uv_folders(env: dict[str, str]) -> list[Path]:
    """The local folders the runner's uv variables name (a wheelhouse, a ``file://`` index): every uv call in the
    sandbox reads them, as uv outside it would."""
    found = []
    for var in UV_SOURCES:
        for item in env.get(var, "").replace(",", " ").split():
            path = Path(item.split("=", 1)[-1].removeprefix("file://"))  # UV_INDEX: name=url
            if path.is_absolute() and path.exists():
                found.append(path)
    return found


def _interpreter_paths() -> list[Path]:
    """What every python of a target environment reads: the base interpreter, the project venv, the harness."""
    import harness

    return [Path(sys.base_prefix), Path(sys.prefix), Path(harness.__file__).parents[1]]


def own(top: Path, uid: int) -> None:
    """chown a tree without following links; handing it back to root also drops every group/other write bit
    and set-id bit the target may have set (chown clears set-id bits; the mask covers the directories)."""
    for path in [top, *top.rglob("*")] if top.is_dir() else [top]:
        os.lchown(path, uid, uid)
        if uid == 0 and not path.is_symlink():
            mode = path.lstat().st_mode
            os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID))


def _end_processes(uid: int) -> None:
    """Whatever the target's code left running (a daemonised child outlives the call)."""
    left = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
    for p in left:
        p.kill()
    psutil.wait_procs(left, timeout=10)


def loopback_only() -> str | None:
    """Move this process (and what it starts after) into a network namespace of its own, loopback up and nothing
    else: no server started after it is reachable from another machine, whatever address it binds. None when
    done, else why not (one line). Call it before any thread starts (a namespace is per thread)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNET) != 0:
        return f"no network namespace: {os.strerror(ctypes.get_errno())}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))
    return None


# --- the in-namespace half (runs as root, then becomes the sandbox user and execs the command) ---


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype, data)]
    _check(libc.mount(enc[0], enc[1], enc[2], flags, enc[3] or None), f"mount {target}")


def _closed_ancestor(path: Path) -> Path | None:
    """The top directory on ``path`` that others may not enter (no x bit for others), if any."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None


def _enter(uid: int, spec: dict[str, object]) -> None:
    libc = _libc()
    flags = CLONE_NEWNS | (0 if spec["network"] else CLONE_NEWNET)
    _check(libc.unshare(flags), "unshare")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    paths = [Path(p) for p in spec["paths"]]  # type: ignore[attr-defined]
    closed: dict[Path, list[Path]] = {}
    for p in paths:
        if (top := _closed_ancestor(p)) is not None:
            closed.setdefault(top, []).append(p)
    for top, inside in sorted(closed.items()):
        fds = {p: os.open(p, os.O_PATH) for p in inside}  # held open: the tmpfs hides the originals
        _mount(libc, "tmpfs", str(top), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        for p in sorted(inside):
            if p.exists():
                continue  # under one bound already
            if stat.S_ISDIR(os.fstat(fds[p]).st_mode):
                p.mkdir(parents=True)
            else:  # a file (a wheel): its folders on the tmpfs first
                p.parent.mkdir(parents=True, exist_ok=True)
                p.touch()
            _mount(libc, f"/proc/self/fd/{fds[p]}", str(p), None, MS_BIND | MS_REC)
        for fd in fds.values():
            os.close(fd)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.chdir(str(spec["cwd"]))
    argv = list(spec["argv"])  # type: ignore[call-overload]
    os.execve(shutil.which(argv[0]) or argv[0], argv, dict(spec["env"]))  # type: ignore[call-overload]


if __name__ == "__main__":
    try:
        _enter(int(sys.argv[1]), json.loads(sys.argv[2]))
    except OSError as exc:
        print(f"harness sandbox: {exc}", file=sys.stderr)
        raise SystemExit(126) from None
