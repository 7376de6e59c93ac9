"""Inside a Ray job: what the job runs on each node of the cluster (a Ray task pinned to that node by node affinity)
and how what each node sends back lands in the run dir.

Why Ray tasks pinned to each node, and not verl's ``finish_hook_cmd`` (verl #7408): the hook is a shell command run
on ranks after the last profiled step, with no channel back but a filesystem every node shares; it exists only in a
verl since #7408 (the harness tests every verl since #5186, bisects included), it runs inside the training, on the
ranks, while the step timers may still run, and it needs one rank a node chosen before Ray places the ranks. A task
pinned to each node after the training has ended reads that node's whole run dir once the ranks are gone (every
dump complete: msprobe has stopped), whatever verl's version, whichever ranks landed there, and also after a crash
(its partial dumps are evidence); it streams the files back through Ray's object store to the job's driver, which
writes them into the run dir and checks each one's size and sha256 against what the node read.

What is sent: the regular files under the node's ``dumps/`` (verl's save_path), its ``metrics.jsonl`` (where Ray
placed the trainer) and its ``finish_hook/`` (what verl's finish hook listed there, a scenario that sets one), nothing
else. A symbolic link, a FIFO or a device there is refused (named, never followed or
opened), as the local dump reader does. The node-side functions use the standard library and Ray only: every node
imports them."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

CHUNK = 4 << 20  # bytes a message: a dump of GBs streams through the object store without holding it whole
SENT = ("dumps", "metrics.jsonl", "finish_hook")  # what a node's run dir holds that the run dir gets
RANK_DIR = "rank"
# what the run's bundle (executor rayjob) holds: the harness's package, the verl under test (a source tree or a
# wheel), the wheels installed beside it
BUNDLE_HARNESS, BUNDLE_VERL, BUNDLE_WHEELS = "harness-src", "verl", "wheels"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def node_facts() -> dict[str, Any]:
    """This node as Ray knows it, and the machine under it (``host``: see ``host_of``)."""
    import ray

    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
        "host": host_of(),
    }


def host_of(path: str = BOOT_ID) -> str:
    """The machine this process runs on: its kernel's boot id, which every container and pod of one machine shares
    (the kernel does not namespace it) and no two machines do; a pod's hostname and address are its own. "" where
    it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read(64).strip()
    except (OSError, UnicodeDecodeError):
        return ""


def prepare(root: str, files: dict[str, bytes], inputs: list[str]) -> dict[str, Any]:
    """On a node, before the training: the run's own dir (new, private), the files every rank reads (the msprobe
    config), and which of the inputs (model, data) this node lacks."""
    facts = node_facts()
    missing = [p for p in inputs if not os.path.exists(p)]
    try:
        Path(root).parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(root, 0o700)  # a fresh name: it must not exist
        for name, data in files.items():
            fd = os.open(os.path.join(root, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except OSError as exc:
        return {**facts, "missing": missing, "error": f"cannot make {root}: {exc.strerror}"}
    return {**facts, "missing": missing, "error": None}


def setup_node(bundle: bytes, digest: str, verl_version: str | None) -> dict[str, Any]:
    """On a node of a cluster verl's RayJob submitter made for one job, before the training: the run's bundle (the
    job's driver read it from its own checked copy and sent it through Ray: nothing here is read from the shared
    cache) unpacked into a directory of this node's own, then the verl under test installed from it, not editable
    (its code copied into site-packages: a rewrite of any copy after this changes nothing the training runs), or,
    for a release, the image's own verl checked to be that release; the wheels beside it (msprobe) installed
    offline; and the harness's copy importable by every later process (a .pth), so the gathering's tasks run on it.
    This node's facts with the line saying so; a bundle that arrives changed, a failing pip or another verl raises
    (the job's set-up fails, naming the node)."""
    import io
    import site
    import subprocess
    import sys
    import tarfile
    import tempfile

    facts = node_facts()
    where = f"node {facts['ip']} ({facts['hostname']})"
    if hashlib.sha256(bundle).hexdigest() != digest:
        raise RuntimeError(f"{where}: the run's bundle arrived changed (sha256): not installed")
    here = Path(tempfile.mkdtemp(prefix="harness-rayjob-"))
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:  # the harness's own archive, its digest checked
        if hasattr(tarfile, "data_filter"):  # an image's Python without the filters (before 3.11.4) extracts as is
            tar.extractall(here, filter="data")
        else:
            tar.extractall(here)
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index"]
    verl = [str(p) for p in sorted((here / BUNDLE_VERL).glob("*.whl"))] or (
        [str(here / BUNDLE_VERL)] if (here / BUNDLE_VERL).is_dir() else []
    )
    wheels = sorted(str(p) for p in (here / BUNDLE_WHEELS).glob("*.whl"))
    for argv in ([*pip, "--no-build-isolation", *verl] if verl else None, [*pip, *wheels] if wheels else None):
        if argv is None:
            continue
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
            raise RuntimeError(f"{where}: pip install {' '.join(argv[6:])[:200]}: {tail}")
    if not verl and verl_version is not None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("verl")
        except PackageNotFoundError:
            found = "none"
        if found != verl_version:
            raise RuntimeError(f"{where}: the image holds verl {found}, the run names verl=={verl_version}: another "
                               "verl would be tested (name a checkout, a commit or a wheel, or the image's own "
                               "release)")  # fmt: skip
    Path(site.getsitepackages()[0], "verl-msprobe-harness-rayjob.pth").write_text(f"{here / BUNDLE_HARNESS}\n")
    what = "verl installed from the run's bundle" if verl else f"the image's verl {verl_version or '(as it is)'}"
    return {**facts, "line": f"{where}: {what}, {len(wheels)} wheel(s), the harness from {here / BUNDLE_HARNESS}"}


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a socket or device" if not stat.S_ISDIR(mode) else "a directory"


def walk(root: str) -> Iterator[tuple[str, str]]:
    """(path relative to ``root``, ``"dir"`` / ``"file"`` / what else it is) of everything that is sent or refused,
    in order, never following a link (``root`` included)."""
    if os.path.islink(root):
        yield ".", "a symbolic link"
        return
    pending = [name for name in SENT if os.path.lexists(os.path.join(root, name))]
    while pending:
        rel = pending.pop(0)
        st = os.lstat(os.path.join(root, rel))
        if stat.S_ISREG(st.st_mode):
            yield rel, "file"
        elif stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode):
            yield rel, "dir"
            pending[:0] = sorted(f"{rel}/{e}" for e in os.listdir(os.path.join(root, rel)))
        else:
            yield rel, _kind(st.st_mode)


def ship(root: str, chunk: int = CHUNK) -> Iterator[tuple[Any, ...]]:
    """On a node, after the training: its run dir as messages, ``("node", facts)`` first, then ``("dir", rel)``,
    ``("file", rel, size)`` + ``("data", bytes)``... + ``("end", sha256)``, ``("refused", rel, kind)``. A Ray
    generator task: the driver reads them as they come."""
    yield ("node", node_facts())
    if not os.path.lexists(root):
        return
    for rel, kind in walk(root):
        if kind == "dir":
            yield ("dir", rel)
            continue
        if kind != "file":
            yield ("refused", rel, kind)
            continue
        try:
            fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            yield ("refused", rel, f"unreadable ({exc.strerror})")
            continue
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):  # swapped since the walk
                yield ("refused", rel, _kind(st.st_mode))
                continue
            yield ("file", rel, st.st_size)
            digest = hashlib.sha256()
            while data := f.read(chunk):
                digest.update(data)
                yield ("data", data)
            yield ("end", digest.hexdigest())


def clean(root: str) -> dict[str, Any]:
    """On a node, after gathering: the run's dir removed (a link there is removed, never followed)."""
    facts = node_facts()
    if os.path.islink(root):
        os.unlink(root)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return {**facts, "left": os.path.lexists(root)}


@dataclass
class _Incoming:
    rel: str
    size: int
    dest: Path | None  # None: read and dropped (refused)
    file: BinaryIO
    digest: Any = field(default_factory=hashlib.sha256)

    @property
    def temp(self) -> Path | None:
        return self.dest.with_name(f".{self.dest.name}.part") if self.dest else None


class Receiver:
    """The driver's side: one node's messages written into the run dir, each file under a temporary name until its
    size and sha256 are those the node read. A path that would leave the run dir, or that another node already
    sent, is refused, not written."""

    def __init__(self, run_dir: Path, taken: dict[str, str], name: str) -> None:
        self.run_dir, self.taken, self.name = run_dir, taken, name  # taken: path -> the node that sent it
        self.files = self.bytes = 0
        self.refused: list[str] = []
        self.rank_dirs: set[int] = set()
        self._open: _Incoming | None = None

    def _dest(self, rel: str) -> Path | None:
        path = PurePosixPath(rel)
        if path.is_absolute() or not path.parts or path.parts[0] not in SENT or ".." in path.parts:
            self.refused.append(f"{rel}: outside the node's dumps and metrics")
            return None
        dest = self.run_dir.joinpath(*path.parts)
        for parent in [self.run_dir, *(self.run_dir.joinpath(*path.parts[:i]) for i in range(1, len(path.parts)))]:
            if parent.is_symlink():
                self.refused.append(f"{rel}: {parent} is a symbolic link in the run dir")
                return None
        return dest

    def take(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "dir":
            if (dest := self._dest(msg[1])) is not None:
                dest.mkdir(parents=True, exist_ok=True)
                self._note_rank(msg[1])
        elif kind == "refused":
            self.refused.append(f"{msg[1]}: {msg[2]}")
        elif kind == "file":
            self._start(msg[1], msg[2])
        elif kind == "data" and self._open:
            self._open.file.write(msg[1])
            self._open.digest.update(msg[1])
        elif kind == "end" and self._open:
            self._finish(msg[1])

    def _note_rank(self, rel: str) -> None:
        last = PurePosixPath(rel).name
        if last.startswith(RANK_DIR) and last[len(RANK_DIR) :].isdigit():
            self.rank_dirs.add(int(last[len(RANK_DIR) :]))

    def _start(self, rel: str, size: int) -> None:
        dest = self._dest(rel)
        if dest is not None and (other := self.taken.get(rel)) is not None:
            self.refused.append(f"{rel}: also sent by {other}; the first kept")
            dest = None
        if dest is None:
            self._open = _Incoming(rel, size, None, open(os.devnull, "wb"))  # noqa: SIM115  # closed in _finish
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        self._open = _Incoming(rel, size, dest, dest.with_name(f".{dest.name}.part").open("wb"))

    def _finish(self, sha: str) -> None:
        assert self._open is not None
        inc, self._open = self._open, None
        inc.file.close()
        if inc.dest is None or inc.temp is None:
            return
        got = inc.temp.stat().st_size
        if inc.digest.hexdigest() != sha or got != inc.size:
            inc.temp.unlink()
            self.refused.append(f"{inc.rel}: {got} bytes arrived of {inc.size}, or other bytes (sha256): not kept")
            return
        os.replace(inc.temp, inc.dest)
        self.taken[inc.rel] = self.name
        self.files += 1
        if inc.rel.startswith(f"{SENT[0]}/"):  # the node's dumps: what its disk budget counts
            self.bytes += inc.size

    def abandon(self) -> None:
        """The node stopped mid-file: its partial file is removed, never left as if whole."""
        if (inc := self._open) is not None:
            self._open = None
            inc.file.close()
            if inc.temp is not None:
                with contextlib.suppress(OSError):
                    inc.temp.unlink()
