"""Whose code made a training fail: read from what the run left (its exit, its log's last traceback).

A failed training is a verdict only when the code under test failed. The last Python traceback in the run's
log (a forked rank's, as torch's ``start_processes`` re-prints it; a Ray worker's, after its ``(Actor pid=N)``
prefix; a ``RayTaskError(X)`` unwrapped to X) names the frames; the party is decided by its files:

- the innermost frame in verl, msprobe or the harness (its workloads and CPU patches) names the party; frames
  of third-party code (torch, transformers, Ray, the standard library) blame the nearest caller that is one of
  the three (msprobe calling torch wrongly is msprobe's), and a traceback with none of them is infrastructure;
- a missing module that is not one of the three's own is an environment error: targets install ``--no-deps``,
  so a pull request that adds a requirement needs it in the image or the project venv, not a verdict on verl;
- a timeout, an OOM kill, a signal, no traceback at all, or an exception that says the machine failed
  (memory, disk, connections, a dead Ray actor or node) is infrastructure.

Files are assigned by path: under a ``site-packages`` (or ``dist-packages``) dir by the package that follows
it, elsewhere (a checkout, the harness's editable install, a container's mount) by the last directory named
``verl``, ``msprobe`` or ``harness``. The same rule holds inside a container, where the host's roots differ.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.artifacts.record import ExecResult
from harness.outside import shown
from harness.safeio import tail_bytes

Party = Literal["verl", "msprobe", "harness", "environment", "infrastructure"]
VERDICT_PARTIES: tuple[Party, ...] = ("verl", "msprobe")  # a crash of the code under test: a check verdict
CODE = ("verl", "msprobe", "harness")
LOG_TAIL_BYTES = 1 << 20  # the last traceback is at the end; a run that logged GBs is read from its last MB
LINE = 2000  # a frame's or an exception's text from the log is cut past this

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its prefixes and actor names
_PREFIX = re.compile(r"^\((?:[\w.]+ )?pid=\d+(?:, ip=[^)]*)?\)\s?")  # Ray: "(TaskRunner pid=123) ..."
_HEADER = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\((?P<inner>[A-Za-z_][\w.]*)\))?)(?::\s?(?P<msg>.*))?$")
MISSING_MODULE = re.compile(r"No module named '(?P<module>[^']+)'")
# exception types that say the machine failed, not the code (their messages are the runner's)
_INFRA_TYPES = re.compile(
    r"^(MemoryError|KeyboardInterrupt|ConnectionError|ConnectionResetError|ConnectionRefusedError|BrokenPipeError|"
    r"TimeoutError|(torch\.)?(distributed\.)?DistNetworkError|ray\.exceptions\.(?!RayTaskError)\w+)$"
)
_INFRA_MESSAGES = re.compile(
    r"No space left on device|Cannot allocate memory|out of memory|Too many open files|Connection closed by peer|"
    r"Connection reset by peer|Broken pipe",
    re.I,
)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    @property
    def party(self) -> str:
        """verl, msprobe, harness, or "other" (torch, the standard library, ...)."""
        parts = Path(self.file).parts[:-1]
        for i in range(len(parts) - 1, -1, -1):
            if parts[i] in ("site-packages", "dist-packages"):
                return parts[i + 1] if i + 1 < len(parts) and parts[i + 1] in CODE else "other"
        return next((p for p in reversed(parts) if p in CODE), "other")

    def where(self) -> str:
        """``verl/utils/profiler/precision_debugger_profile.py:176 in _should_collect``: the path inside its
        package, as it reads in the package's repository."""
        parts = Path(self.file).parts
        if (party := self.party) != "other":
            idx = max(i for i, p in enumerate(parts[:-1]) if p == party)
            parts = parts[idx:]
        return f"{Path(*parts)}:{self.line} in {self.function}"


@dataclass(frozen=True)
class Traceback:
    exception: str  # the type, unwrapped from RayTaskError(X)
    message: str
    frames: tuple[Frame, ...]  # outermost first

    def text(self) -> str:
        return f"{self.exception}: {self.message}" if self.message else self.exception

    def blamed(self) -> Frame | None:
        """The innermost frame of verl, msprobe or the harness: the code that raised or made the call that did."""
        return next((f for f in reversed(self.frames) if f.party != "other"), None)


def last_traceback(text: str) -> Traceback | None:
    """The last complete Python traceback in a log: its frames and the exception line that ends it, each as one
    printable line (``harness.outside.shown``): the log is the code under test's, and its exception's message is
    quoted in the error lines and verdicts a workflow prints."""
    lines = [_PREFIX.sub("", _ANSI.sub("", ln)) for ln in text.splitlines()]
    starts = [i for i, ln in enumerate(lines) if _HEADER.match(ln)]
    for start in reversed(starts):
        frames: list[Frame] = []
        for ln in lines[start + 1 :]:
            if m := _FRAME.match(ln):
                frames.append(Frame(shown(m["file"], LINE), int(m["line"]), shown(m["func"], LINE)))
                continue
            if ln.startswith((" ", "\t")) or not ln.strip():
                continue  # a frame's source line, its carets, a blank line inside a chained message
            m = _EXCEPTION.match(ln)
            if m is None or not frames:
                break
            if m["inner"] and m["type"].startswith("ray.exceptions.RayTaskError"):
                continue  # the remote traceback follows: its frames and its exception are the cause
            return Traceback(m["inner"] or m["type"], shown((m["msg"] or "").strip(), LINE), tuple(frames))
    return None


@dataclass(frozen=True)
class Crash:
    """Why one training failed, and whose fault it is (recorded in run.json)."""

    party: Party
    reason: str  # one line: what happened
    exception: str | None = None  # "ValueError: Unknown precision_debugger stage: train_batch"
    where: str | None = None  # "verl/utils/profiler/precision_debugger_profile.py:176 in _should_collect"
    file: str | None = None  # the frame's file as the run saw it
    module: str | None = None  # environment: the missing module
    # both runs failed the same way, off and on, in this party's code (``party`` then says infrastructure: no verdict
    # on the tool from one target; base against head makes it one on head where base trained, pipeline.base_head)
    alike: str | None = None  # "verl" or "msprobe"

    @property
    def verdict(self) -> bool:
        """A crash of the code under test: the crash check fails (exit 1), not an error (exit 2)."""
        return self.party in VERDICT_PARTIES

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def missing_module(text: str) -> str | None:
    """The module a ``No module named 'x'`` line names, when it is none of verl's, msprobe's or the harness's own (a
    missing requirement of the environment, not a bug of theirs)."""
    m = MISSING_MODULE.search(text)
    return m["module"] if m and m["module"].split(".")[0] not in CODE else None


def declared(requires: list[str], modules: list[str]) -> str:
    """Which of verl's declared requirements (``Requires-Dist``) name the missing modules, as a clause."""
    tops = {canonicalize_name(m.split(".")[0]) for m in modules}
    named = [r for r in requires if canonicalize_name(Requirement(r).name) in tops]
    return f" (verl declares {'; '.join(named)})" if named else " (not among verl's declared requirements either)"


# how classify's reasons open where the machine failed a training that may run the next time (a lost port, a
# timeout, a signal): not OOM, not a missing traceback, not both runs failing alike (runs._both_failed rewords it)
TRANSIENT = ("the machine failed the training", "timed out after", "training was killed by signal")


def transient(reason: str) -> bool:
    return reason.startswith(TRANSIENT)


def classify(
    res: ExecResult, log: Path, timeout_s: float, requires: list[str] | None = None, limit: str = "executor.timeout_s"
) -> Crash | None:
    """None for a clean exit; else the party and one line. ``requires``: verl's declared requirements, to say
    whether a missing module is one of them; ``limit``: what set ``timeout_s`` (the scenario, the job)."""
    if res.timed_out:
        return Crash("infrastructure", f"timed out after {timeout_s:.0f}s ({limit}); killed")
    if res.oom_killed:
        return Crash("infrastructure", f"killed for memory (OOM) with exit code {res.exit_code}")
    if res.exit_code == 0:
        return None
    if res.exit_code is None or res.exit_code < 0:
        how = "did not start" if res.exit_code is None else f"was killed by signal {-res.exit_code}"
        return Crash("infrastructure", f"training {how}{f': {res.detail}' if res.detail else ''}")
    tb = last_traceback(tail_bytes(log, LOG_TAIL_BYTES))
    if tb is None:
        return Crash("infrastructure", f"training exited with code {res.exit_code}, no Python traceback in its log")
    frame = tb.blamed()
    where = frame.where() if frame else None
    common = {"exception": tb.text(), "where": where, "file": frame.file if frame else None}
    module = missing_module(tb.message) if tb.exception in ("ModuleNotFoundError", "ImportError") else None
    if module:
        return Crash(
            "environment",
            f"the training imports {module!r}, which its environment lacks{declared(requires or [], [module])} "
            f"({where or 'no frame named'}): targets "
            "install --no-deps, so a requirement verl adds must be in the image or the project venv",
            module=module,
            **common,
        )
    if _INFRA_TYPES.match(tb.exception) or _INFRA_MESSAGES.search(tb.message):
        return Crash("infrastructure", f"the machine failed the training: {tb.text()}", **common)
    if frame is None:
        return Crash("infrastructure", f"training raised {tb.text()} outside verl, msprobe and the harness", **common)
    party: Party = frame.party  # type: ignore[assignment]  # one of CODE: blamed() skips "other"
    return Crash(party, f"{party} raised {tb.text()} at {where}", **common)
