"""The checks applied to every scenario, in report order; a new check is one module plus a line here."""

from harness.checks.base import Check, CheckContext, CheckResult
from harness.checks.contents import check_contents
from harness.checks.crash import check_crash, not_checked
from harness.checks.disk import check_disk
from harness.checks.layout import check_layout
from harness.checks.overhead import check_overhead
from harness.outside import shown

CHECKS: dict[str, Check] = {
    "crash": check_crash,
    "layout": check_layout,
    "contents": check_contents,
    "overhead": check_overhead,
    "disk": check_disk,
}


LINE = 4000  # a check's line is cut past this


def run_check(name: str, check: Check, ctx: CheckContext) -> CheckResult:
    """Every entry point runs a check through here: after a crash of verl or msprobe, only the crash check has
    something to judge. Its lines quote what the code under test left (a dump dir's name, a log's message, a hook's
    listing): each is one printable line (``harness.outside.shown``) wherever it is printed or stored, never a
    workflow command (a stage dir named ``x\\n::error::...`` was one in the layout's problem)."""
    res = not_checked(ctx, name) or check(ctx)
    for lines in (res.problems, res.notes, res.inconclusive):
        lines[:] = [shown(line, LINE) for line in lines]
    for said in ("summary", "not_checked", "xfail_reason", "not_gated"):
        setattr(res, said, shown(getattr(res, said), LINE))
    return res


__all__ = ["CHECKS", "Check", "CheckContext", "CheckResult", "run_check"]
