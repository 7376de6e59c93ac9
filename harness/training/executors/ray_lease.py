"""The harness's lease on a Ray job: a SIGKILLed harness stops nothing itself, so the job stops itself.

While the harness follows a job it rewrites a small file in the run dir every ``RENEW_S`` (``Renewal``); the job's
entrypoint watches that file (``Watch``) and, once it has not changed for ``STALE_S`` by the entrypoint's own clock,
stops the training and removes the run from every node. Why a file in the run dir: the entrypoint already needs the
run dir, at the same path, on the node that holds the job's driver (it gathers every node's dumps there), so whatever
machine of the cluster Ray runs the entrypoint on, it sees the file; the harness reaches the cluster only through the
Job Submission API (HTTP), which has no value a running job can read back, and a Ray KV entry or a heartbeat actor
would need a Ray driver on the harness's host (none runs there: no local raylet). The entrypoint compares the
file's contents, never its time stamp, against its own monotonic clock: the harness's host and the head need not
agree on the time, and a shared filesystem's attribute cache cannot fake a renewal (each read opens the file anew,
which NFS's close-to-open consistency revalidates). That consistency is checked, not assumed: a job submitted
through verl's RayJob submitter sets nothing up before it has seen the lease change (``renewed``). A file rewritten
in place (not renamed over) keeps one inode, so a client never holds a stale name. Removing the file (the harness's
run over) is never a renewal either.

The run dir is the job's to write too (the training runs there): the renewal never writes through a link found at
the lease's name (it would rewrite whatever the link points to on the harness's host) nor into anything but a
regular file (``safeio.open_to_write``); such a lease is said in one line and no longer renewed, so the job stops
itself once it is stale, as it would for a harness that is gone.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError
from harness.safeio import open_to_write

FILE = ".ray-lease"
RENEW_S = 5.0
STALE_S = 30.0  # six renewals: a loaded host's late renewal is not a dead harness
POLL_S = 1.0


class Renewal:
    """The harness's side: rewrites ``path`` every ``every_s`` until closed, then removes it."""

    def __init__(self, path: Path, every_s: float = RENEW_S) -> None:
        self.path, self.every_s = path, every_s
        self._done = threading.Event()
        self._count = itertools.count()
        self.renew()  # before the job is submitted: the entrypoint's first read is a lease
        self._thread = threading.Thread(target=self._loop, name="harness-ray-lease", daemon=True)
        self._thread.start()

    def renew(self) -> None:
        """One renewal, in place (one inode, never a rename); HarnessError in one line where the lease is a link, a
        directory or another thing that is not a regular file, or cannot be written."""
        with open_to_write(self.path) as f:
            f.write(f"{next(self._count)}\n")

    def _loop(self) -> None:
        said = False
        while not self._done.wait(self.every_s):
            try:
                self.renew()
            except (HarnessError, OSError) as exc:  # the job stops itself once this lasts STALE_S: said once
                if not said:
                    print(f"harness: cannot renew the Ray job's lease: {exc}", file=sys.stderr, flush=True)
                    said = True

    def close(self) -> None:
        """The renewals stopped and the lease removed: a link there goes (never what it points to); anything else
        that took its name is left, said in one line."""
        self._done.set()
        self._thread.join(timeout=self.every_s + 5)
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            print(f"harness: the Ray job's lease {self.path} is not removed: {exc.strerror}", file=sys.stderr,
                  flush=True)  # fmt: skip

    def __enter__(self) -> Renewal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Lease:
    """The entrypoint's view of the lease, pure: fed what the file holds and the time, it says whether it is stale
    (unchanged for more than ``stale_s``)."""

    def __init__(self, first: str | None, now: float, stale_s: float) -> None:
        self.held, self.changed, self.stale_s = first, now, stale_s

    def observe(self, content: str | None, now: float) -> bool:
        """True once the content has not changed for more than ``stale_s``; an absent file changes nothing."""
        if content is not None and content != self.held:
            self.held, self.changed = content, now
        return now - self.changed > self.stale_s

    def silent_for(self, now: float) -> float:
        return now - self.changed


def renewed(path: Path, within_s: float, poll_s: float = POLL_S, clock: Callable[[], float] = time.monotonic) -> bool:
    """Whether the lease changes within ``within_s`` as this process sees it (the job's first step, before anything
    is set up: proof that the harness is alive and that this machine sees what the harness's host writes into the
    shared filesystem; a filesystem that served this pod a cached copy would otherwise make a live harness look
    gone, or a gone one alive)."""
    first, until = read(path), clock() + within_s
    while clock() < until:
        time.sleep(poll_s)
        if (now := read(path)) is not None and now != first:
            return True
    return False


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


class Watch(threading.Thread):
    """The entrypoint's side: polls the file; once the lease is stale, sets ``expired`` and calls ``on_stale`` (once)
    with how long it has been silent."""

    def __init__(self, path: Path, stale_s: float, on_stale: Callable[[float], None], poll_s: float = POLL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__(name="harness-ray-lease-watch", daemon=True)
        self.path, self.on_stale, self.poll_s, self.clock = path, on_stale, poll_s, clock
        self.lease = Lease(read(path), clock(), stale_s)
        self.expired = threading.Event()
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.poll_s):
            now = self.clock()
            if self.lease.observe(read(self.path), now):
                self.expired.set()
                self.on_stale(self.lease.silent_for(now))
                return

    def close(self) -> None:
        self._done.set()
