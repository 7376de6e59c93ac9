"""A CPU platform for verl's platform registry (``VERL_PLATFORM``): verl ships cuda, npu and rocm only.

Ray sees the ranks as logical ``GPU`` resources (verl's resource-pool check counts accelerators), the
process group is gloo, and the device module is ``torch.cpu`` plus the memory and RNG calls verl makes on
an accelerator module, answered for the host.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil
import torch
from verl.plugin.platform import PlatformBase


def _device_module() -> types.ModuleType:
    mod = types.ModuleType("harness_cpu_device", "torch.cpu plus what verl calls on torch.cuda")
    mod.__dict__.update({k: getattr(torch.cpu, k) for k in dir(torch.cpu) if not k.startswith("_")})
    zero: Any = lambda *_a, **_k: 0  # noqa: E731
    none: Any = lambda *_a, **_k: None  # noqa: E731
    mod.__dict__.update(
        current_device=lambda: "cpu",
        device_count=lambda: 1,
        set_device=none,
        empty_cache=none,
        ipc_collect=none,
        reset_peak_memory_stats=none,
        set_per_process_memory_fraction=none,
        memory_allocated=zero,
        max_memory_allocated=zero,
        memory_reserved=zero,
        max_memory_reserved=zero,
        mem_get_info=lambda *_: (psutil.virtual_memory().available, psutil.virtual_memory().total),
        get_device_name=lambda *_: "cpu",
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        get_rng_state=lambda *_: torch.get_rng_state(),
        set_rng_state=lambda state, *_: torch.set_rng_state(state),
    )
    return mod


class CpuPlatform(PlatformBase):
    """Chosen only by name (``VERL_PLATFORM``, ``names.PLATFORM``), never by verl's auto-detection."""

    _module = _device_module()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "harness"

    @property
    def device_module(self) -> types.ModuleType:
        return self._module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False

    def current_device(self) -> Any:
        return "cpu"  # verl passes it to module.to(device=...): an index would mean an accelerator

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None: ...

    def synchronize(self, device_index: int | None = None) -> None: ...

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None: ...

    def empty_cache(self) -> None: ...

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None: ...

    def profiler_stop(self) -> None: ...

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
