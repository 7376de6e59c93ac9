"""The layers hold at run time: each package of pyproject's layers contract, imported alone in a fresh interpreter
(every module of it), loads no module of a package above it or beside it.

import-linter (``lint-imports``) reads import statements; this also sees what a module imports by name while it is
loaded (``import_module("harness.training...")``), the crossing a registry of plugins hides from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
LAYERS = [[name.strip() for name in layer.split("|")] for layer in CONTRACT["layers"]]
# every module of the package, then what the interpreter holds
IMPORT_ALONE = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for module in pkgutil.walk_packages(getattr(package, "__path__", []), package.__name__ + "."):
    importlib.import_module(module.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_contract_is_the_layers_one() -> None:
    assert CONTRACT["type"] == "layers" and LAYERS[0] == ["harness.__main__"]


@pytest.mark.parametrize(
    ("depth", "name"),
    # the top layer is ``python -m harness`` itself (importing it runs the command line), with nothing above it
    [(depth, name) for depth, layer in enumerate(LAYERS) for name in layer if depth > 0],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_package_imported_alone_loads_no_module_above_it(depth: int, name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALONE, name], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.splitlines()[-1])
    above = [n for layer in LAYERS[:depth] for n in layer] + [n for n in LAYERS[depth] if n != name]
    crossing = [m for m in loaded if any(m == a or m.startswith(f"{a}.") for a in above)]
    assert not crossing, f"importing {name} loads {crossing} (a layer above it, or beside it)"


def test_loading_every_scenario_imports_no_workload_executor_or_docker_sdk() -> None:
    code = (
        "import json, pathlib, sys\n"
        "from harness.scenario.loader import load_scenario\n"
        "for path in sorted(pathlib.Path('scenarios').glob('*.yaml')): load_scenario(path)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.splitlines()[-1])
    implementations = [
        m for m in loaded if m.startswith(("harness.training", "harness.targets")) or m.split(".")[0] == "docker"
    ]
    assert not implementations, f"loading the scenarios imports {implementations}"
