"""Whether verl failed on the harness's CPU platform only because the platform lags verl (stdlib only: read by the
harness's process, never imported by verl's).

verl's real trainer runs on CPU through a platform of the harness's (``cpu_platform.CpuPlatform``, registered under
``names.PLATFORM``). A verl that calls a platform method its own ``PlatformBase`` or CUDA platform defines, which the
harness's lacks (an ``AttributeError`` naming the class, or an abstract method the class does not implement), fails in
verl's frame but through the harness's fault: verl trains on its own platforms. A method that neither defines is
verl's own (its CUDA and NPU runners fail the same way): that stays a failure of verl.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.training.workloads.verl_cpu.names import PLATFORM_CLASS

# the platforms a method verl calls on every runner must be defined in (a TPU-only method is not one of them)
PLATFORMS = ("verl/plugin/platform/platform_base.py", "verl/plugin/platform/platform_cuda.py")
_MISSING = re.compile(rf"^AttributeError: '{PLATFORM_CLASS}' object has no attribute '(?P<name>\w+)'")
_ABSTRACT = re.compile(rf"^TypeError: Can't instantiate abstract class {PLATFORM_CLASS}\b")


def defined(path: Path) -> set[str]:
    """The names a file's classes define (methods, properties, class attributes); none where it does not parse."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return set()
    out: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def lagging(exception: str | None, packages_dir: str | None) -> str | None:
    """Why a failure of verl on the harness's CPU platform is the harness's (None: it is not): ``exception``, the
    crash's ``Type: message``; ``packages_dir``, the directory holding the verl that ran."""
    if not exception:
        return None
    if _ABSTRACT.match(exception):
        return (
            f"the harness's CPU platform ({PLATFORM_CLASS}) lacks a method verl's PlatformBase declares abstract "
            f"({exception}): the harness's platform lags verl, not a verdict on verl"
        )
    if not (m := _MISSING.match(exception)) or not packages_dir:
        return None
    where = [f for f in PLATFORMS if m["name"] in defined(Path(packages_dir) / f)]
    if not where:
        return None  # verl's own platforms lack it too: verl fails on its own runners the same way
    return (
        f"the harness's CPU platform ({PLATFORM_CLASS}) lacks {m['name']}, which verl defines in {', '.join(where)} "
        f"({exception}): the harness's platform lags verl, not a verdict on verl"
    )
