"""Run with a target environment's python: what its verl and msprobe are, and whether they still offer what the
harness drives. Standard library only (it runs before anything else is known to work there; ``harness.outside`` is too).

``python -m harness.targets.probe facts`` prints versions and install dirs; ``... api SYMBOLS_JSON`` tries each
dotted symbol (``verl.utils.profiler.DistProfiler.annotate``) and reads verl's stage table; ``... predicates
YAML_TEXT NAMES_JSON`` asks verl's own ``verl.trainer.ppo.utils`` predicates (which stages its trainer runs)
about a resolved config; ``... dialect`` reads how its precision_debugger is configured.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.outside import shown

PACKAGES = ("verl", "mindstudio-probe", "torch", "torch_npu", "transformers")
PREFIX = "HARNESS-PROBE "  # the answer's line, the last one so marked
STAGE_TABLE = ("verl.utils.profiler.precision_debugger_profile", "_STAGE_TO_ROLE")


def facts() -> dict[str, object]:
    """Versions, where verl is installed (msprobe's stack.json records those paths) and its hydra config dir;
    without importing verl (which imports torch)."""
    versions: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    import sysconfig

    spec = importlib.util.find_spec("verl")
    verl_dir = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    own = sysconfig.get_paths()["purelib"]  # a target environment's own site-packages, before the layered venv's
    msprobe = importlib.util.find_spec("msprobe")
    try:
        requires = metadata.requires("verl") or []
    except metadata.PackageNotFoundError:
        requires = []
    return {
        "versions": versions,
        "packages_dir": str(verl_dir.parent) if verl_dir else None,
        "verl_config_dir": str(verl_dir / "trainer" / "config") if verl_dir else None,
        "site": own,
        "own_distributions": sorted(d.metadata["Name"] or "?" for d in metadata.distributions(path=[own])),
        "msprobe_dir": str(Path(msprobe.origin).parent) if msprobe and msprobe.origin else None,
        "verl_requires": requires,
    }


def resolve(symbol: str) -> str | None:
    """None when ``symbol`` resolves; else why not, in one line."""
    parts = symbol.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
                continue  # a shorter prefix is the module, the rest are attributes
            return f"importing {module} fails: ModuleNotFoundError: {exc}"
        except Exception as exc:  # whatever the target's import does: reported, not raised
            return f"importing {module} fails: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        for j, attr in enumerate(parts[i:], start=i):
            if not hasattr(obj, attr):
                return f"{'.'.join(parts[:j])} has no attribute {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"no module {parts[0]}"


def api(symbols: list[str]) -> dict[str, object]:
    problems = {s: why for s in symbols if (why := resolve(s))}
    stages = None
    try:
        table = getattr(importlib.import_module(STAGE_TABLE[0]), STAGE_TABLE[1], None)
        stages = sorted(table) if isinstance(table, dict) else None
    except Exception:  # a missing table only skips the stage check; the symbols say why
        pass
    return {"problems": problems, "stages": stages}


def predicates(config: object, names: list[str]) -> dict[str, bool | str]:
    """``verl.trainer.ppo.utils.<name>(config)`` for each name (True/False), or why it cannot be asked. ``config``
    is a resolved OmegaConf config or the YAML text of one (the argument, not a file: the sandboxed probe may read
    no file of the harness's; omegaconf comes with verl)."""
    import warnings

    from omegaconf import OmegaConf

    cfg = OmegaConf.create(config) if isinstance(config, str) else config
    try:
        utils = importlib.import_module("verl.trainer.ppo.utils")
    except Exception as exc:
        return {n: f"importing verl.trainer.ppo.utils fails: {type(exc).__name__}: {exc}" for n in names}
    out: dict[str, bool | str] = {}
    for name in names:
        predicate = getattr(utils, name, None)
        if predicate is None:
            out[name] = f"verl.trainer.ppo.utils has no {name} (API drift)"
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # need_critic warns when it decides there is no critic
            out[name] = bool(predicate(cfg))
    return out


def dialect() -> dict[str, object]:
    """What the precision_debugger configuration looks like in this verl: the fields of its
    ``PrecisionDebuggerToolConfig`` and ``ProfilerConfig``, and what its ``DistProfiler`` does on rank 1 when
    enabled for precision_debugger with no ranks named (verl #5986 profiles every rank, msprobe's config.json
    filtering; before it, rank 0 only). Asked of verl's own code, never of its version string."""
    import dataclasses
    import tempfile

    try:
        from verl.utils.profiler import DistProfiler, ProfilerConfig
        from verl.utils.profiler.config import PrecisionDebuggerToolConfig

        tool = [f.name for f in dataclasses.fields(PrecisionDebuggerToolConfig)]
        profiler = [f.name for f in dataclasses.fields(ProfilerConfig)]
        on: dict[str, object] = {"enable": True} if "enable" in tool else {}  # #5186's tool config turns it on
        tool_config = PrecisionDebuggerToolConfig(**on)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory() as tmp:
            config = ProfilerConfig(tool="precision_debugger", enable=True, save_path=tmp, tool_config=tool_config)
            every_rank = bool(DistProfiler(rank=1, config=config, tool_config=tool_config).check_this_rank())
    except Exception as exc:  # reported: the harness names it as API drift
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    return {"tool_fields": tool, "profiler_fields": profiler, "every_rank": every_rank}


def answer(out: str) -> dict[str, Any] | None:
    """The probe's answer in its output (the last ``HARNESS-PROBE`` line; None: none, or no JSON object), every
    string shown as one line (``harness.outside``): the target's own code ran in that interpreter before the probe
    printed (its import-time code, its metadata's names and versions), and what it says is printed in error lines,
    the target's description and results.json."""
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith(PREFIX)), None)
    try:
        found = json.loads(line.removeprefix(PREFIX)) if line else None
    except (ValueError, RecursionError):
        return None
    return _shown(found) if isinstance(found, dict) else None


def _shown(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {shown(k, 4096): _shown(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_shown(v) for v in doc]
    return shown(doc, 4096) if isinstance(doc, str) else doc


def main(argv: list[str]) -> int:
    out: dict[str, object]
    if argv[0] == "facts":
        out = facts()
    elif argv[0] == "dialect":
        out = dialect()
    elif argv[0] == "predicates":
        out = dict(predicates(argv[1], json.loads(argv[2])))
    else:
        out = api(json.loads(argv[1]))
    sys.stdout.write(PREFIX + json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
