"""``python -m harness dry-run SCENARIOS``: print exactly what each training would run, start nothing.

For the operator who checks a runner's scenarios by eye before the first night: image, devices, mounts,
environment, argv and msprobe config, for the off and the on run, as the executor would hand them to
Docker (``container_spec``) or to a local process. The runs are prepared in a temporary directory (the only
thing written) and its path is shown as the results path the real run would use.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.devices import device_problem
from harness.executors.base import ENV_ALLOWLIST, InfraError
from harness.loader import ScenarioError, load_scenario, scenario_files
from harness.rundir import MODES, ScenarioDir
from harness.runs import LABEL_PREFIX
from harness.scenario import Scenario
from harness.target_env import TargetEnv
from harness.workloads.base import Launch, WorkloadError
from harness.workloads.settings import WORKLOADS
from harness.workloads.verl_ppo import Inputs, VerlPpoSettings


def _argv_lines(argv: list[str]) -> list[str]:
    quoted = [shlex.quote(a) for a in argv]
    head = " ".join(quoted[:3])
    return [
        f"  {head}" + (" \\" if quoted[3:] else ""),
        *(f"    {a} \\" for a in quoted[3:-1]),
        *([f"    {quoted[-1]}"] if quoted[3:] else []),
    ]


def _docker_lines(launch: Launch, scenario: Scenario, labels: dict[str, str], run: Any) -> list[str]:
    from harness.executors.docker import container_spec  # the docker SDK only when a scenario uses it

    spec = container_spec(launch, run, scenario.executor, labels)
    rt = scenario.executor.docker
    out = [f"image: {spec['image']}" + ("" if rt.image_kind == "auto" else f" ({rt.image_kind})")]
    devices = spec.get("devices", [])
    if spec.get("runtime"):
        devices = [*devices, f"runtime={spec['runtime']}"]
    out.append(
        f"devices: {', '.join(d.split(':')[0] for d in devices if ':' in d) or 'none'}"
        + (f" (runtime {spec['runtime']})" if spec.get("runtime") else "")
    )
    if spec.get("device_requests"):
        out.append(f"gpus: {', '.join(','.join(r['DeviceIDs']) for r in spec['device_requests'])}")
    out.append(
        f"container: user {spec['user']}, workdir {spec['working_dir']}, shm {spec['shm_size']}, "
        f"network {spec['network_mode']}, timeout {scenario.executor.timeout_s:g}s"
        + (f", memory {spec['mem_limit']}" if spec.get("mem_limit") else "")
    )
    out.append("mounts:")
    out += [f"  {m['Source']} -> {m['Target']} ({'ro' if m['ReadOnly'] else 'rw'})" for m in spec["mounts"]]
    out.append("env:")
    out += [f"  {k}={v}" for k, v in sorted(spec["environment"].items())]
    out.append("argv:")
    out += _argv_lines(spec["command"])
    return out


def _local_lines(launch: Launch) -> list[str]:
    import os

    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ} | {"PYTHONUNBUFFERED": "1", **launch.env}
    return [
        f"local process in {launch.workdir}",
        "env:",
        *(f"  {k}={v}" for k, v in sorted(env.items())),
        "argv:",
        *_argv_lines(launch.argv(launch.python or sys.executable)),
    ]


def describe(scenario: Scenario, path: Path, results: Path, env: TargetEnv | None = None) -> list[str]:
    """The dry-run text of one scenario with the target's environment ``env`` (None: the pinned releases); raises
    WorkloadError when its runs cannot be prepared."""
    python = env.python if env else None
    ex = scenario.executor
    lines = [
        f"=== {scenario.name} ({path})",
        f"device {scenario.device}, engine {scenario.engine}, world_size {scenario.world_size}, "
        f"{scenario.steps} steps, profiled {scenario.precision_debugger.steps}, executor {ex.kind}",
    ]
    if why := device_problem(scenario):
        lines.append(f"on this host: skipped ({why})")
    workload = WORKLOADS[scenario.workload.kind]
    build = getattr(workload, "build", workload.prepare)  # build: prepare without looking for inputs here
    w = scenario.workload
    if isinstance(w, VerlPpoSettings):
        inputs = Inputs.of(w)
        for what, p in (("model", inputs.model), ("train data", inputs.train), ("val data", inputs.val)):
            lines.append(f"{what}: {p} ({'present' if p.exists() else 'absent'} on this host)")
        lines.append(f"data preparation (when the parquet files are absent): {shlex.join(inputs.prepare_data_argv())}")
    with tempfile.TemporaryDirectory(prefix="harness-dry-run-") as tmp:
        sdir = ScenarioDir(Path(tmp) / scenario.name)
        for mode in MODES:
            run = sdir.run(mode)
            launch = build(scenario, run, enabled=mode == "on", python=python)
            labels = {
                f"{LABEL_PREFIX}.session": "<session>",
                f"{LABEL_PREFIX}.scenario": scenario.name,
                f"{LABEL_PREFIX}.run": mode,
            }
            lines.append(f"--- {mode} run (precision_debugger {'enabled' if mode == 'on' else 'disabled'})")
            if isinstance(w, VerlPpoSettings):
                pinned = env is None or env.target.verl.kind == "pinned"
                verl = f"verl {w.verl_version}" if pinned else env.target.verl.identity  # type: ignore[union-attr]
                lines.append(f"overrides checked offline against {verl}'s hydra config: ok")
            lines += _docker_lines(launch, scenario, labels, run) if ex.kind == "docker" else _local_lines(launch)
            if mode == "on" and run.msprobe_config.is_file():
                lines.append(f"msprobe config ({run.msprobe_config}):")
                lines += [
                    f"  {ln}" for ln in json.dumps(json.loads(run.msprobe_config.read_text()), indent=2).splitlines()
                ]
        real = str(results / scenario.name)
        return [ln.replace(str(sdir.root), real) for ln in lines]


def dry_run(args: list[str], results: Path, env: TargetEnv | None = None) -> int:
    """Print every scenario's dry run; 2 when a file is invalid or a run cannot be prepared, else 0."""
    status = 0
    for path in scenario_files(args):
        try:
            scenario = load_scenario(path)
            print("\n".join(describe(scenario, path, results, env)))
        except ScenarioError as exc:
            print(f"=== {path}\nINVALID SCENARIO:\n{exc}")
            status = 2
        except (WorkloadError, InfraError) as exc:
            print(f"=== {path}\nCANNOT PREPARE: {exc}")
            status = 2
        print()
    return status
