"""``python -m harness.training.workloads.verl_cpu.main <main_ppo overrides>``: verl's real ``main_ppo`` on CPU.

Why a launcher: Ray needs a temp dir of its own per run (sessions, sockets, spilled objects; a short path,
as Unix socket paths are capped at 107 bytes), created here and removed on every exit, and the verl that
will run must hold every symbol the plugin relies on, checked before Ray starts. SIGTERM (the executor's
first signal on timeout) exits through ``finally`` so Ray shuts its cluster down.

Why a network namespace: Ray 2.60 ignores the loopback address it is given for most of its servers. Measured
during a real_fsdp_l0 run with ``_node_ip_address=127.0.0.1`` (psutil, listening sockets of the run's process
tree): GCS, raylets, the driver and every worker on ``::``, the autoscaler monitor and a dashboard process on
``0.0.0.0``, the runtime-env agent, the dashboard agent and TransferQueue's controller and storage unit on the
host's address. Whoever reaches GCS runs code here: in a namespace of its own with only loopback, there is nothing
else to listen on, and the cluster asks for a token of its own (Ray's token authentication, ``RAY_AUTH_MODE=token``,
set by the training's watchdog) that only the training's process tree holds (docs/security.md).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


PREFIX = "vh-ray-"


def _remove_stale(root: Path) -> None:
    """Ray dirs of launchers that were killed (SIGKILL leaves no ``finally``): named after their pid."""
    for old in root.glob(f"{PREFIX}*-*"):
        pid = old.name.removeprefix(PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str]) -> int:
    import importlib.util

    from harness.training.workloads.verl_cpu.patches import missing

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        print("harness CPU launcher: verl is not importable here", file=sys.stderr)
        return 3
    if problems := missing(Path(next(iter(spec.submodule_search_locations)))):
        print("harness CPU launcher: " + "; ".join(problems), file=sys.stderr)
        return 3
    from harness.targets.sandbox import loopback_only

    if (why := loopback_only()) is not None:  # not root (the docker executor's container has no network at all)
        print(f"harness CPU launcher: Ray's servers may listen beyond loopback: {why}", flush=True)
    else:
        print("harness CPU launcher: network namespace of its own: loopback only", flush=True)
    signal.signal(signal.SIGTERM, _terminate)
    _remove_stale(Path("/tmp"))
    ray_tmp = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir="/tmp")
    os.environ["RAY_TMPDIR"] = ray_tmp
    print(f"harness CPU launcher: RAY_TMPDIR={ray_tmp}", flush=True)
    try:
        from verl.trainer import main_ppo

        sys.argv = [main_ppo.__file__, *argv]
        main_ppo.main()
        return 0
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
