"""The checks applied to every scenario, in report order; a new check is one module plus a line here."""

from harness.checks.base import Check, CheckContext, CheckResult
from harness.checks.contents import check_contents
from harness.checks.disk import check_disk
from harness.checks.layout import check_layout
from harness.checks.overhead import check_overhead

CHECKS: dict[str, Check] = {
    "layout": check_layout,
    "contents": check_contents,
    "overhead": check_overhead,
    "disk": check_disk,
}

__all__ = ["CHECKS", "Check", "CheckContext", "CheckResult"]
