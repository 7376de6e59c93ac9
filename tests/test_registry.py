"""A new workload and a new executor are each a settings module plus one line in the scenario format's registry, and
an implementation plus one line in training's: proved on a copy of the package, where the scenario format, the CLI,
pytest's choices and a whole run pick them up."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# The echo workload's settings block, in the scenario format.
ECHO_SETTINGS = '''"""Echo's block: how many entries its dumps hold."""

from typing import Literal

from harness.scenario.blocks import ScenarioView
from harness.strict import Strict


class EchoSettings(Strict):
    kind: Literal["echo"]
    entries: int = 3

    def check_scenario(self, scenario: ScenarioView) -> None:
        pass
'''

# A workload that needs no torch: the launched module writes msprobe-shaped dumps and verl-shaped metrics.
ECHO = '''"""Echo: a throwaway workload that writes what a training would leave."""

import json
import sys
from pathlib import Path
from typing import ClassVar

from harness.training.launch import Launch
from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import ScenarioView


class Echo:
    name: ClassVar[str] = "echo"
    symbols: ClassVar[tuple[str, ...]] = ()  # drives nothing of verl

    def prepare(self, scenario: ScenarioView, run: RunDir, enabled: bool, *, dry=False, python=None) -> Launch:
        run.root.mkdir(parents=True, exist_ok=True)
        pd = scenario.precision_debugger
        spec = {"steps": scenario.steps, "ranks": scenario.world_size, "entries": scenario.workload.entries,
                "profiled": pd.steps if enabled else [], "stages": pd.stages, "dumps": str(run.dumps),
                "metrics": str(run.metrics)}
        run.spec.write_text(json.dumps(spec))
        return Launch(
            module="harness.training.workloads.echo", args=[str(run.spec)], env={}, workdir=run.root, python=python
        )

    def takes_slot(self, scenario: ScenarioView) -> bool:
        return False

    def describe(self, scenario: ScenarioView, run: RunDir, python=None) -> list[str]:
        return ["echo: writes dumps, trains nothing"]


def _tensor() -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.0}


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    for step in spec["profiled"]:
        for stage in spec["stages"]:
            for rank in range(spec["ranks"]):
                leaf = Path(spec["dumps"], f"step_{step}", stage, "step0", f"rank{rank}")
                leaf.mkdir(parents=True)
                kinds = ("forward", "backward") if stage == "actor_update" else ("forward",)
                data = {f"Functional.linear.{i}.{d}": {"input_args": [_tensor()], "output": [_tensor()]}
                        for i in range(spec["entries"]) for d in kinds}
                doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None, "data": data}
                (leaf / "dump.json").write_text(json.dumps(doc))
                for extra in ("stack.json", "construct.json"):
                    (leaf / extra).write_text("{}")
    with open(spec["metrics"], "w") as out:
        for step in range(1, spec["steps"] + 1):
            t = 0.2 if step in spec["profiled"] else 0.1
            out.write(json.dumps({"step": step, "data": {"timing_s/step": t, "timing_s/update_actor": t / 2}}) + "\\n")
'''

# The inline executor's options block, in the scenario format.
INLINE_SETTINGS = '''"""Inline's block: what its runs say first."""

from harness.strict import Strict


class InlineOptions(Strict):
    greeting: str = "hello"
'''

# An executor with an options block of its own: it runs the launch as a plain child process.
INLINE = '''"""Inline: a throwaway executor that runs the launch as a plain child process."""

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from harness.training.launch import Launch
from harness.artifacts.record import ExecResult
from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import ExecutorSettingsBase


class InlineExecutor:
    name: ClassVar[str] = "inline"

    def execute(
        self,
        launch: Launch,
        run: RunDir,
        settings: ExecutorSettingsBase,
        labels: dict,
        stop: threading.Event | None = None,
    ) -> ExecResult:
        started = time.monotonic()
        with run.log.open("w") as log:
            log.write(settings.options("inline").greeting + "\\n")
            log.flush()
            code = subprocess.call(launch.argv(sys.executable), cwd=launch.workdir, stdout=log, stderr=log)
        return ExecResult(code, time.monotonic() - started, argv=launch.argv(sys.executable))

    def describe(self, launch: Launch, run: RunDir, settings: ExecutorSettingsBase, labels: dict) -> list[str]:
        return [f"inline child process, greeting {settings.options('inline').greeting!r}"]

    def environment(self, settings: ExecutorSettingsBase, packages_dir: str | None) -> dict[str, Any]:
        return {}

    def device_ids(self, settings: ExecutorSettingsBase, device: str) -> list[int] | None:
        return None

    def sweep(self, settings: Sequence[ExecutorSettingsBase] = ()) -> list[str]:
        return []
'''


def _registry_line(pkg: Path, registry: str, after: str, line: str) -> None:
    """Add ``line`` after ``after`` in one registry of the copy, and prove that this line is the whole change."""
    path = pkg / registry
    text = path.read_text()
    assert after in text
    edited = text.replace(after, after + line)
    path.write_text(edited)
    diff = difflib.unified_diff(text.splitlines(), edited.splitlines(), lineterm="", n=0)
    assert [ln for ln in diff if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] == [f"+{line.rstrip()}"]


@pytest.mark.integration
def test_a_new_workload_and_executor_are_modules_and_one_line_in_each_registry(tmp_path):
    pkg = tmp_path / "harness"
    shutil.copytree(ROOT / "harness", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "scenario" / "settings" / "echo.py").write_text(ECHO_SETTINGS)
    (pkg / "scenario" / "settings" / "inline.py").write_text(INLINE_SETTINGS)
    (pkg / "training" / "workloads" / "echo.py").write_text(ECHO)
    (pkg / "training" / "executors" / "inline.py").write_text(INLINE)
    settings, implementations = "scenario/settings/__init__.py", "training/registry.py"
    _registry_line(
        pkg,
        settings,
        '            "harness.scenario.settings.verl_ppo:VerlPpoSettings",\n',
        '            "harness.scenario.settings.echo:EchoSettings",\n',
    )
    _registry_line(
        pkg,
        settings,
        '        "docker": "harness.scenario.settings.docker:DockerRuntime",\n',
        '        "inline": "harness.scenario.settings.inline:InlineOptions",\n',
    )
    _registry_line(
        pkg,
        implementations,
        '    "harness.training.workloads.verl_ppo:VerlPpo",\n',
        '    "harness.training.workloads.echo:Echo",\n',
    )
    _registry_line(
        pkg,
        implementations,
        '    "harness.training.executors.docker:DockerExecutor",\n',
        '    "harness.training.executors.inline:InlineExecutor",\n',
    )

    scenario = {
        "engine": "fsdp",
        "world_size": 2,
        "steps": 4,
        "workload": {"kind": "echo", "entries": 4},
        "precision_debugger": {"task": "statistics", "level": "L1", "steps": [2], "stages": ["actor_update"]},
        "budgets": {"overhead": {"max_profiled_ratio": 3, "max_unprofiled_ratio": 1.5}},
        "executor": {"kind": "inline", "inline": {"greeting": "from the registry"}},
    }
    path = tmp_path / "scenarios" / "echo_case.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(scenario))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the copy, not the installed package

    def harness(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness", *argv], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    schema = json.loads(harness("schema").stdout)
    assert "EchoSettings" in schema["$defs"] and "InlineOptions" in schema["$defs"]
    assert "inline" in schema["$defs"]["ExecutorSettings"]["properties"]["kind"]["enum"]
    assert "{local,docker,inline,ray,rayjob}" in harness("run", "--help").stdout
    path.with_name("typo.yaml").write_text(yaml.safe_dump({**scenario, "workload": {"kind": "echo", "entrie": 4}}))
    typo = harness("validate", str(path.with_name("typo.yaml")))
    assert typo.returncode == 2 and "workload.entrie: unknown field; did you mean 'entries'?" in typo.stderr
    assert "inline child process, greeting 'from the registry'" in harness("dry-run", str(path)).stdout
    proc = harness("run", str(path), "--results", str(tmp_path / "results"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "results" / "echo_case" / "on" / "train.log").read_text().startswith("from the registry")
    doc = json.loads((tmp_path / "results" / "echo_case" / "results.json").read_text())
    assert all(c["passed"] for c in doc["checks"].values()), doc["checks"]
    assert doc["environment"]["executor"] == "inline"
    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "{local,docker,inline,ray,rayjob}" in plugin.stdout
