"""Dump structure: which entries msprobe wrote, per stage and rank, with its call counters folded away.

msprobe numbers every call of an API or module (``Functional.linear.3.forward``). Two runs that dump the
same calls differ in nothing but those counters, while a run that stops dumping ``linear`` (or starts
dumping something new) changes the *set* of names. Folding the counter into a per-name count keeps both
visible: ``Functional.linear.forward: 4`` (``dumpfile.normalise``). The counts are a summary of the dump's one
whole read (the contents check's, earlier in this process), or of a read here where there was none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from harness.artifacts.dumpfile import DumpFile
from harness.artifacts.reader import DumpTree

Structure = dict[str, dict[str, Any]]  # "stage/rankR" -> {"entries": int, "names": {normalised: count}}


def key(stage: str, rank: int | None) -> str:
    return f"{stage}/rank{rank}" if rank is not None else f"{stage}/proc"


def structure_of(dumps: Path) -> Structure:
    """Entry counts and normalised name counts per stage and rank, summed over the profiled steps.

    Unreadable dump.json files are skipped: the contents check reports them; here they show up as
    missing entries against the baseline."""
    out: dict[str, Counter[str]] = {}
    for d in DumpTree.scan(dumps).dirs:
        if (names := _folded_names(d.path / "dump.json")) is not None:
            out.setdefault(key(d.stage, d.rank), Counter()).update(names)
    return {
        k: {"entries": sum(names.values()), "names": dict(sorted(names.items()))} for k, names in sorted(out.items())
    }


def _folded_names(path: Path) -> Counter[str] | None:
    """Normalised entry names of one dump with their counts; None unless it reads to the end with a data mapping."""
    try:
        summary = DumpFile(path).summary()
    except (OSError, ValueError):
        return None
    return summary.names if summary.has_data else None


def name_diff(base: dict[str, int], now: dict[str, int], ignore: Collection[str] = ()) -> list[str]:
    """Readable differences between two normalised name counts: ``-Functional.linear.forward x4``."""
    out = []
    for name in sorted((set(base) | set(now)) - set(ignore)):
        b, n = base.get(name, 0), now.get(name, 0)
        if b == n:
            continue
        if n == 0:
            out.append(f"-{name} x{b}")
        elif b == 0:
            out.append(f"+{name} x{n}")
        else:
            out.append(f"{name} x{b}->x{n}")
    return out
