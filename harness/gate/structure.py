"""Dump structure: which entries msprobe wrote, per stage and rank, with its call counters folded away.

msprobe numbers every call of an API or module (``Functional.linear.3.forward``). Two runs that dump the
same calls differ in nothing but those counters, while a run that stops dumping ``linear`` (or starts
dumping something new) changes the *set* of names. Folding the counter into a per-name count keeps both
visible: ``Functional.linear.forward: 4`` (``dumpfile.normalise``). The counts are the run's facts, folded by its
dumps' one read when the run was judged (``harness.artifacts.dumpfacts``), or read here where none were stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from harness.artifacts.dumpfacts import DumpFacts, DumpReads
from harness.artifacts.reader import DUMP_DIR_RE, DumpTree
from harness.artifacts.rundir import RunDir

Structure = dict[str, dict[str, Any]]  # "stage/rankR" -> {"entries": int, "names": {normalised: count}}


def key(stage: str, rank: int | None) -> str:
    return f"{stage}/rank{rank}" if rank is not None else f"{stage}/proc"


def structure_of(dumps: Path, facts: DumpFacts | None = None) -> Structure:
    """Entry counts and normalised name counts per stage and rank, summed over the profiled steps: from ``facts``,
    else the run's stored facts (``<run>/dump_facts.json``: what its one read of each dump found), else the dumps read
    here (a run judged by an earlier harness, a tree of dumps alone).

    Unreadable dump.json files are left out: the contents check reports them; here they show up as missing entries
    against the baseline. Raises InputError where the stored facts are not such a file."""
    if facts is None:
        facts = DumpFacts.recorded(RunDir(dumps.parent)) or DumpReads(dumps).facts(DumpTree.scan(dumps))
    out: dict[str, Counter[str]] = {}
    for rel, fact in facts.dumps.items():
        if fact.names is not None and (m := DUMP_DIR_RE.match(rel.removesuffix("/dump.json"))):
            rank = int(m["rank"]) if m["rank"] is not None else None
            out.setdefault(key(m["stage"], rank), Counter()).update(fact.names)
    return {
        k: {"entries": sum(names.values()), "names": dict(sorted(names.items()))} for k, names in sorted(out.items())
    }


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
