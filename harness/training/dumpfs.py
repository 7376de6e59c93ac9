"""The on run's dumps on a size-bounded filesystem: a dump cap that holds whatever the write rate.

The monitor (``harness.training.monitor``) walks the dump tree once a second; msprobe's tensor task wrote four steps'
dumps (28.5 MB/s) between two walks and was stopped at 23-30 MB against a 2 MB cap, and on an NPU such a burst is
gigabytes. So, where the harness may mount (root), the on run's dumps dir is a tmpfs of the cap plus a margin
(``margin``: page rounding of small files, and room for the monitor's own verdict): past it every write fails
(ENOSPC) and the tree stays within cap + margin however fast it is written. Under the docker executor the container
sees it through the run dir's bind mount. When the run is over the tree is copied to the results filesystem as it
was (``cp -a``: links and FIFOs stay what they are, nothing is followed) and the tmpfs unmounted, so the checks read
an ordinary dir. A tmpfs holds its files in memory: a cap larger than a quarter of the memory available, or a harness
that may not mount, leaves the cap to the monitor alone, and the run says so in one line (``Bounded.line``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.artifacts.figures import mb
from harness.errors import InfraError

MIN_MARGIN = 1 << 20
PAGE = mmap.PAGESIZE


def margin(cap: int) -> int:
    """How far past the cap the bounded tree may grow: an eighth of the cap, at least 1 MiB."""
    return max(MIN_MARGIN, cap // 8)


@dataclass(frozen=True)
class Bounded:
    """How an on run's dumps are bounded: ``size`` bytes of tmpfs, or None where only the monitor polls (``why``)."""

    cap: int
    size: int | None
    why: str = ""

    def line(self) -> str:
        if self.size is not None:
            return (f"dump cap {mb(self.cap)} held: the dumps on a {mb(self.size)} tmpfs (the cap + a margin of "
                    f"{mb(self.size - self.cap)}); writes past it fail")  # fmt: skip
        return (f"dump cap {mb(self.cap)} polled, not held: {self.why}; a burst between two of the monitor's walks "
                "can overshoot it")  # fmt: skip


def _available_memory() -> int | None:
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/meminfo") as f:
        return int(next(line for line in f if line.startswith("MemAvailable:")).split()[1]) * 1024
    return None


def plan(cap: int) -> Bounded:
    """Whether this harness can hold ``cap`` with a tmpfs: root (a mount), Linux, and the tmpfs at most a quarter of
    the memory available."""
    size = -(-(cap + margin(cap)) // PAGE) * PAGE  # tmpfs rounds its size up to whole pages: said as it is
    if sys.platform != "linux" or os.geteuid() != 0:
        return Bounded(cap, None, "mounting a size-bounded tmpfs for the dumps needs root")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return Bounded(cap, None, "no mount command here")
    if (free := _available_memory()) is None or size > free // 4:
        have = f"{mb(free)} available" if free is not None else "memory available unknown"
        return Bounded(cap, None, f"a {mb(size)} tmpfs is over a quarter of the memory ({have})")
    return Bounded(cap, size)


def _run(argv: list[str]) -> str:
    """``argv``'s error output, "" when it succeeded."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if proc.returncode == 0 else (proc.stderr.strip() or f"exit code {proc.returncode}")


def mounted_under(root: Path) -> list[Path]:
    """The mount points at or below ``root`` (/proc/self/mountinfo), deepest first."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = [Path(line.split()[4].encode().decode("unicode_escape")) for line in lines if len(line.split()) > 4]
    return sorted((p for p in points if p == root or root in p.parents), key=lambda p: -len(p.parts))


def release_stale(root: Path) -> None:
    """Unmount what a harness killed mid-run left mounted under a scenario dir (its dumps' tmpfs), before the dir is
    removed for new runs: rmtree cannot remove a mount point, and the tmpfs holds memory."""
    for point in mounted_under(root):
        _run(["umount", "--lazy", str(point)])


@contextlib.contextmanager
def bounded(dumps: Path, cap: int | None) -> Iterator[Bounded | None]:
    """The on run's dumps dir, bounded for the duration (None: no cap). After the run its tree is on the results
    filesystem as it was written; an InfraError where it cannot be put there."""
    if cap is None:
        yield None
        return
    how = plan(cap)
    if how.size is None:
        yield how
        return
    dumps.mkdir(parents=True, exist_ok=True)
    options = f"size={how.size},mode=0755,uid={os.getuid()},gid={os.getgid()}"
    if err := _run(["mount", "-t", "tmpfs", "-o", options, "harness-dumps", str(dumps)]):
        yield Bounded(cap, None, f"the tmpfs could not be mounted ({err.splitlines()[0][:200]})")
        return
    try:
        yield how
    except BaseException:  # an interrupt or an error of the run: its tree kept all the same, that error raised
        with contextlib.suppress(InfraError):
            _keep(dumps)
        raise
    _keep(dumps)


def _keep(dumps: Path) -> None:
    """The bounded tree copied beside its mount point, the tmpfs unmounted, the copy put in its place (an empty tree
    leaves no dumps dir, as an unbounded run that dumped nothing)."""
    copy = dumps.with_name(f".{dumps.name}.kept")
    shutil.rmtree(copy, ignore_errors=True)
    failed = _run(["cp", "-a", "--", str(dumps), str(copy)])
    unmounted = _run(["umount", str(dumps)]) and _run(["umount", "--lazy", str(dumps)])
    if failed or unmounted:
        raise InfraError(f"the dumps of {dumps.parent} could not be kept from their tmpfs: {failed or unmounted}")
    dumps.rmdir()
    if any(copy.iterdir()):
        copy.rename(dumps)
    else:
        copy.rmdir()
