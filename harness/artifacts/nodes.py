"""nodes.json: where a run on a Ray cluster ran and what each node's disk held, as the job gathered it.

verl writes each rank's dumps on its own node's disk; the ray executor's job gathers every node's save_path into the
run dir (``harness.training.executors.ray_entry``) and writes this record beside it: each node, the ranks Ray placed
there (read from Ray: the actors of the training whose runtime environment sets ``RANK``), what was gathered from it,
and what could not be. The checks read it to judge layout and disk per node and to name a node in every line."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.safeio import MB, InputError, Versioned


class NodeDoc(BaseModel):
    """One node of the cluster, as the job saw it after the training."""

    model_config = ConfigDict(extra="forbid")
    node_id: str  # Ray's
    ip: str
    hostname: str = ""
    host: str = ""  # the machine under it: its kernel's boot id, one per machine whatever pods or containers share it
    head: bool = False
    alive: bool = True  # when the job gathered (a node that died took its dumps with it)
    ranks: list[int] = []  # the ranks Ray placed there
    files: int = 0  # regular files gathered from its run dir (dumps, metrics)
    bytes: int = 0  # the bytes of its dumps: what the run wrote on the node's own disk
    dump_ranks: list[int] = []  # the rank<R> dirs its save_path held
    refused: list[str] = []  # paths under its run dir not gathered: links, FIFOs, devices ("<path>: <kind>")
    problem: str | None = None  # gathering failed or was cut short: its dumps in the run dir are incomplete

    @property
    def name(self) -> str:
        """How every line names it: its address, its host name and the head of Ray's id."""
        host = f"{self.hostname}, " if self.hostname and self.hostname != self.ip else ""
        return f"{'head ' if self.head else ''}node {self.ip} ({host}{self.node_id[:8]})"


class NodesRecord(Versioned):
    """nodes.json: a run's nodes, gathered by its Ray job (written in the cluster, read by the checks)."""

    FILE = "nodes.json"
    REDO = "re-run the scenario with this harness"
    schema_version: Literal[2] = 2  # 2: each node's host (schema 1 had none: read as unknown)
    job: str  # the Ray job's submission id
    nodes: list[NodeDoc]
    placement: str  # where each rank's node was read from
    complete: bool  # every alive node gathered in full; False: the run dir holds part of the dumps (``error``)
    error: str | None = None  # why not: an infrastructure error, not a verdict on verl

    @classmethod
    def read(cls, path: Path) -> NodesRecord | None:
        """None when the run did not run on a cluster (or left no record that reads: its checks say so)."""
        try:
            return cls.read_file(path, 16 * MB, follow=False)
        except InputError:
            return None

    def node_of(self, rank: int | None) -> NodeDoc | None:
        """The node Ray placed ``rank`` on (the first, should a rank appear on several)."""
        return next((n for n in self.nodes if rank is not None and rank in n.ranks), None)

    def where(self, rank: int | None) -> str:
        """`` on node ...`` for a line about ``rank``'s dumps, or "" when Ray placed no such rank."""
        node = self.node_of(rank)
        return f" on {node.name}" if node else ""

    def holders(self, ranks: Iterable[int]) -> list[tuple[NodeDoc, list[int]]]:
        """Each node with those of ``ranks`` (the ranks that dump: precision_debugger.ranks, all by default) that Ray
        placed on it: the rank dirs its disk must hold. An empty list: a node whose ranks all lie outside the subset,
        which must hold no dumps at all. Read from Ray's placement, never from rank order: Ray decides which node a
        rank lands on, so which nodes a subset of ranks touches is known only after the run."""
        wanted = set(ranks)
        return [(n, sorted(wanted & set(n.ranks))) for n in self.nodes]

    def numbered(self) -> list[tuple[int, NodeDoc]]:
        """The nodes that held ranks, numbered by their lowest rank (node0 holds rank 0): a figure's name stays the
        same from run to run while Ray's node ids and addresses change."""
        placed = sorted((n for n in self.nodes if n.ranks), key=lambda n: min(n.ranks))
        return list(enumerate(placed))
