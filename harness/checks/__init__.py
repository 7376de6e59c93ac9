"""The checks applied to every scenario, in report order; a new check is one module plus a line here."""

from harness.checks.base import Check, CheckContext, CheckResult
from harness.checks.contents import check_contents
from harness.checks.crash import check_crash, not_checked
from harness.checks.disk import check_disk
from harness.checks.layout import check_layout
from harness.checks.overhead import check_overhead

CHECKS: dict[str, Check] = {
    "crash": check_crash,
    "layout": check_layout,
    "contents": check_contents,
    "overhead": check_overhead,
    "disk": check_disk,
}


def run_check(name: str, check: Check, ctx: CheckContext) -> CheckResult:
    """Every entry point runs a check through here: after a crash of verl or msprobe, only the crash check has
    something to judge."""
    return not_checked(ctx, name) or check(ctx)


__all__ = ["CHECKS", "Check", "CheckContext", "CheckResult", "run_check"]
