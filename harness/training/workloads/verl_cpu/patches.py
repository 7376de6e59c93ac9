"""Every verl symbol the CPU workload relies on, in one place, and the patches to verl's private code.

verl moves: each symbol is checked before a run (statically, by reading the target verl's source without
importing it: ``missing``) and again in every verl process before it is used (``resolve``). A missing one
is an infrastructure error that names it, never a silent fallback. Public plugin points are listed too:
they are what a verl release is likeliest to keep, but nothing here assumes one version.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Symbol:
    module: str
    name: str  # a module-level name, or ``Class.attr``
    why: str
    private: bool = False

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


PLATFORM_REGISTRY = Symbol("verl.plugin.platform", "PlatformRegistry.register", "registers the CPU platform")
PLATFORM_BASE = Symbol("verl.plugin.platform", "PlatformBase", "the CPU platform's base class")
REPLICA_REGISTRY = Symbol(
    "verl.workers.rollout.replica", "RolloutReplicaRegistry.register", "registers the HF-generate rollout"
)
REPLICA_BASE = Symbol("verl.workers.rollout.replica", "RolloutReplica", "the HF-generate replica's base class")
TOKEN_OUTPUT = Symbol("verl.workers.rollout.replica", "TokenOutput", "what the HF-generate server returns")
ROLLOUT_BASE = Symbol("verl.workers.rollout.base", "BaseRollout", "the in-worker adapter's base class")
ROLLOUT_ADAPTERS = Symbol(
    "verl.workers.rollout.base",
    "_ROLLOUT_REGISTRY",
    "the in-worker adapter of a rollout name (no public API registers one)",
    private=True,
)
PROCESS_GROUP = Symbol(
    "verl.utils.distributed",
    "initialize_global_process_group_ray",
    'builds backend "cpu:gloo,cpu:gloo" on CPU, which torch rejects: wrapped to use "gloo"',
    private=True,
)
WORKERS_PROCESS_GROUP = Symbol(
    "verl.workers.engine_workers",
    "initialize_global_process_group_ray",
    "the engine workers' own binding of it (imported by name, so wrapped before they import it)",
    private=True,
)
VALUEHEAD_LOADER = Symbol(
    "verl.utils.model",
    "load_valuehead_model",
    "loads the critic with attn_implementation flash_attention_2 hard-coded: replaced by sdpa on CPU",
    private=True,
)
SYMBOLS = (
    PLATFORM_REGISTRY,
    PLATFORM_BASE,
    REPLICA_REGISTRY,
    REPLICA_BASE,
    TOKEN_OUTPUT,
    ROLLOUT_BASE,
    ROLLOUT_ADAPTERS,
    PROCESS_GROUP,
    WORKERS_PROCESS_GROUP,
    VALUEHEAD_LOADER,
)


def _source(verl_dir: Path, module: str) -> Path | None:
    rel = Path(*module.split(".")[1:])
    for path in (verl_dir / rel.with_suffix(".py"), verl_dir / rel / "__init__.py"):
        if path.is_file():
            return path
    return None


def _defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Names a module (or class) body binds at its top level, looking into if/try blocks."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        elif isinstance(node, ast.If | ast.Try):
            for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", []))):
                out.update(_defined(block))
    return out


def missing(verl_dir: Path) -> list[str]:
    """The symbols the verl at ``verl_dir`` lacks, one line each; read from its source, nothing imported.

    A name re-exported by a package ``__init__`` counts as defined there (``verl.plugin.platform``)."""
    problems = []
    for sym in SYMBOLS:
        path = _source(verl_dir, sym.module)
        head, _, attr = sym.name.partition(".")
        names = _defined(ast.parse(path.read_text()).body) if path else {}
        node = names.get(head)
        if node is not None and attr and isinstance(node, ast.ClassDef):
            node = _defined(node.body).get(attr)
        if node is None:
            where = f"{path}" if path else f"no module {sym.module} under {verl_dir}"
            problems.append(f"{sym} is missing ({where}); the CPU workload needs it: {sym.why}")
    return problems


def resolve(sym: Symbol) -> Any:
    """The live object, or RuntimeError naming the symbol (in a verl process, before the symbol is used)."""
    obj: Any = importlib.import_module(sym.module)
    for part in sym.name.split("."):
        if not hasattr(obj, part):
            raise RuntimeError(f"harness CPU plugin: verl has no {sym} ({sym.why})")
        obj = getattr(obj, part)
    return obj


def _replace(sym: Symbol, new: Any) -> None:
    resolve(sym)
    setattr(importlib.import_module(sym.module), sym.name, new)


def gloo_process_group() -> None:
    import sys

    original = resolve(PROCESS_GROUP)

    def initialize_global_process_group_ray(timeout_second: Any = None, backend: str | None = None) -> None:
        return original(timeout_second=timeout_second, backend=backend if backend == "cpu:gloo" else "gloo")

    _replace(PROCESS_GROUP, initialize_global_process_group_ray)
    if WORKERS_PROCESS_GROUP.module in sys.modules:  # imported already: rebind its copy of the name too
        _replace(WORKERS_PROCESS_GROUP, initialize_global_process_group_ray)


def sdpa_valuehead_loader() -> None:
    def load_valuehead_model(local_path: str, torch_dtype: Any, model_config: Any, trust_remote_code: bool) -> Any:
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification.from_pretrained(
            pretrained_model_name_or_path=local_path,
            torch_dtype=torch_dtype,
            config=model_config,
            attn_implementation="sdpa",  # torch's own kernel: runs on CPU
            trust_remote_code=trust_remote_code,
        )

    _replace(VALUEHEAD_LOADER, load_valuehead_model)


def no_pinned_memory() -> None:
    """FSDP2's ``CPUOffloadPolicy(pin_memory=True)``, which verl forces for the reference model, pins host
    memory, which needs an accelerator; with none there is nothing to pin. Touches torch, no verl symbol."""
    import torch

    torch.Tensor.pin_memory = lambda self, *_a, **_k: self


def register_rollout_adapter(name: str, fqn: str) -> None:
    resolve(ROLLOUT_ADAPTERS)[(name, "async")] = fqn
