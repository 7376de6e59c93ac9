"""What a workload hands an executor: a Launch. It sits below workloads and executors, which therefore never import
each other; what the executor hands back is ``harness.artifacts.record.ExecResult``."""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness.errors import WorkloadError
from harness.targets.spec import Package


@dataclass(frozen=True)
class NodeRun:
    """A run on the nodes of a Ray cluster (the ray executor). Each node keeps what the training writes there (the
    save_path, the metrics of the trainer if it lands there) and the msprobe config under ``root``, a directory of
    this run's own on that node's disk, until the job has gathered every node's into the run dir; the workload
    points verl at these paths, the executor places, gathers and removes them."""

    root: PurePosixPath
    nnodes: int
    per_node: int  # ranks on each node
    resource: str  # the Ray resource each rank asks for: "GPU" (CUDA, and the CPU platform's logical GPUs), "NPU"
    python: str | None = None  # the interpreter on the nodes; None: the target's, at the same path as on this host

    @classmethod
    def new(
        cls, scratch: str, scenario: str, mode: str, nnodes: int, per_node: int, resource: str, python: str | None
    ) -> NodeRun:
        """A root of its own: two harnesses submitting the same scenario to one cluster never share one."""
        root = PurePosixPath(scratch) / f"{scenario}-{mode}-{uuid.uuid4().hex[:8]}"
        return cls(root, nnodes, per_node, resource, python)

    @property
    def dumps(self) -> PurePosixPath:
        """verl's save_path on every node: each rank writes its dumps on its own node's disk."""
        return self.root / "dumps"

    @property
    def metrics(self) -> PurePosixPath:
        """verl's file logger (VERL_FILE_LOGGER_PATH): on whichever node Ray places the trainer."""
        return self.root / "metrics.jsonl"

    @property
    def msprobe_config(self) -> PurePosixPath:
        return self.root / "msprobe_config.json"

    @property
    def finish_hook(self) -> PurePosixPath:
        """Where verl's finish hook records what each selected rank would ship (gathered with the dumps)."""
        return self.root / "finish_hook"

    @property
    def job(self) -> str:
        """The Ray job's submission id."""
        return f"harness-{self.root.name}"


@dataclass(frozen=True)
class Launch:
    """``python -m module *args`` in ``workdir`` (read-write); ``inputs`` are mounted read-only."""

    module: str
    args: list[str]
    env: dict[str, str]
    workdir: Path
    inputs: list[Path] = field(default_factory=list)
    python: str | None = None  # the target environment's interpreter; None: the executor's default
    target: str | None = None  # the verl identity a self-contained image must hold; None: the pinned release
    node: NodeRun | None = None  # a run on a Ray cluster's nodes (the ray executor); None: on one host
    verl: Package | None = None  # the verl under test, where it came from (executor rayjob: its nodes install it)

    def argv(self, python: str) -> list[str]:
        return [python, "-m", self.module, *self.args]

    def on_nodes(self, executor: str) -> NodeRun:
        """The run on a Ray cluster's nodes that a cluster executor (``executor``) needs; a workload that made none
        cannot run there: one line."""
        if self.node is None:
            raise WorkloadError(f"{self.module}: this workload cannot run on a Ray cluster (executor {executor})")
        return self.node


def argv_lines(argv: list[str]) -> list[str]:
    """An argv as shell-quoted lines, one argument per line after the module (for dry runs)."""
    quoted = [shlex.quote(a) for a in argv]
    head = " ".join(quoted[:3])
    return [
        f"  {head}" + (" \\" if quoted[3:] else ""),
        *(f"    {a} \\" for a in quoted[3:-1]),
        *([f"    {quoted[-1]}"] if quoted[3:] else []),
    ]
