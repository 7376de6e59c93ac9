"""Turning precision_debugger on must not crash the training: a crash in verl or msprobe is this check's failure.

The most serious regression the integration can have is a training that dies because the tool is on. Whose code
raised is decided from what the run left (``harness.artifacts.crash``); a crash of the harness, the environment or
the runner never gets here (it is an error, exit 2). Each problem is what a verl maintainer could paste into an
issue: the exception, the file and line it came from, how the other run ended, and the command that reproduces it.
"""

from __future__ import annotations

import re

from harness.artifacts.crash import Crash
from harness.artifacts.rundir import MODES, Mode
from harness.checks.base import CheckContext, CheckResult
from harness.errors import InfraError
from harness.scenario.blocks import KnownBug


def _ended(ctx: CheckContext, mode: Mode) -> str:
    rec = ctx.records.get(mode)
    if ctx.untrained(mode):
        return f"the {mode} run was not trained (none of its figures is judged here)"
    if rec is None:
        return f"the {mode} run did not run (the off run comes first; a failed one ends the pair)"
    code, wall = rec.result.exit_code, rec.result.wall_s
    took = f" in {wall:.1f}s"
    return f"the {mode} run exited {'cleanly' if code == 0 else f'with code {code}'}{took}"


def _reproduce(ctx: CheckContext) -> str:
    spec = next((((r.target or {}).get("verl") or {}).get("spec") for r in ctx.records.values()), None)
    return f"python -m harness run scenarios/{ctx.scenario.name}.yaml" + (f" --verl {spec}" if spec else "")


def crash_line(ctx: CheckContext, mode: Mode, crash: Crash) -> str:
    other = next(m for m in MODES if m != mode)
    return (
        f"{crash.party} crashed the {mode} run (precision_debugger {mode}): {crash.exception} at {crash.where}; "
        f"{_ended(ctx, other)}; log {ctx.dir.run(mode).log}; reproduce: {_reproduce(ctx)}"
    )


def known_bug(ctx: CheckContext) -> KnownBug | None:
    """The declared known bug the crash check is expected to fail with: every crash matches one (the xfail), or
    none happened (an XPASS: the bug is fixed, remove the declaration). None when no bug is declared, or a crash
    matches none of them (a new crash: a plain failure)."""
    bugs = ctx.scenario.expect.known_bugs
    if not bugs:
        return None
    matched = [
        next((b for b in bugs if b.party == c.party and re.search(b.raises, c.exception or "")), None)
        for c in ctx.crashes.values()
    ]
    if not matched:
        return bugs[0]
    return matched[0] if all(matched) else None


def check_crash(ctx: CheckContext) -> CheckResult:
    missing = [m for m in MODES if m not in ctx.records and not ctx.untrained(m)]
    failed = any(bool(r.crash or r.error or r.stopped or r.result.exit_code) for r in ctx.records.values())
    if missing and not failed:  # how a run ended is unknown: never a pass (a failed off run ends the pair: said)
        where = ", ".join(str(ctx.dir.run(m).record) for m in missing)
        raise InfraError(
            f"{where}: no run record (missing, or of another schema): how the run ended is unknown, so nothing "
            "is judged; run the scenario again (without --reuse)"
        )
    res = CheckResult("crash")
    for mode, crash in ctx.crashes.items():
        res.problems.append(crash_line(ctx, mode, crash))
        res.figures[f"crash.{mode}"] = crash.party
    crashed = ", ".join(f"{m} by {c.party}" for m, c in ctx.crashes.items())
    ended = ", ".join(_ended(ctx, m).removeprefix("the ") for m in MODES)
    res.summary = f"{len(ctx.crashes)} crashed: {crashed}" if ctx.crashes else ended
    if bug := known_bug(ctx):
        res.xfail_reason = f"known {bug.party} bug: {bug.reason}"
    return res


def not_checked(ctx: CheckContext, check: str) -> CheckResult | None:
    """A check other than this one has nothing to check after a crash: its result says why (never a pass)."""
    if check == "crash" or not ctx.crashes:
        return None
    crashed = " and ".join(f"the {m} run" for m in ctx.crashes)
    return CheckResult(check, not_checked=f"{crashed} crashed: see the crash check")
