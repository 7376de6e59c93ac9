"""Imported by verl in every process (``VERL_USE_EXTERNAL_MODULES``): makes verl's real trainer run on CPU.

Registers the CPU platform (selected by ``VERL_PLATFORM``) and the HF-generate rollout through verl's
plugin points, and applies the private patches of ``patches``, each after checking its symbol exists.
"""

from __future__ import annotations

from importlib import import_module

from harness.training.workloads.verl_cpu import names, patches

ROLLOUT_MODULE = f"{__package__}.rollout"  # imported when verl asks for the rollout: it imports verl itself


def _install() -> None:
    for sym in patches.SYMBOLS:
        if sym is not patches.WORKERS_PROCESS_GROUP:  # importing the workers here would bind the unwrapped name
            patches.resolve(sym)
    from harness.training.workloads.verl_cpu.cpu_platform import CpuPlatform

    patches.resolve(patches.PLATFORM_REGISTRY)(platform=names.PLATFORM)(CpuPlatform)
    patches.resolve(patches.REPLICA_REGISTRY)(names.ROLLOUT, lambda: import_module(ROLLOUT_MODULE).HFGenerateReplica)
    patches.register_rollout_adapter(names.ROLLOUT, f"{ROLLOUT_MODULE}.HFServerAdapter")
    patches.gloo_process_group()
    patches.sdpa_valuehead_loader()
    patches.no_pinned_memory()


_install()
