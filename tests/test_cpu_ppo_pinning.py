"""The embedded workload pins its ranks only when they fill the cores it may use."""

from __future__ import annotations

import pytest

from harness.training.workloads.cpu_ppo import train as cpu_ppo_train


@pytest.mark.parametrize(
    ("cores", "world_size", "rank", "pinned"),
    [
        ({4, 9}, 2, 1, {9}),  # the ranks fill the cores: rank R on the R-th of them
        ({4, 9}, 2, 0, {4}),
        (set(range(16)), 2, 0, None),  # cores to spare: side-by-side trainings would stack on the first ones
        ({0, 1}, 1, 0, None),  # one rank: the scheduler's
    ],
)
def test_ranks_are_pinned_only_when_they_fill_the_cores(monkeypatch, cores, world_size, rank, pinned):
    calls: list[set[int]] = []
    monkeypatch.setattr(cpu_ppo_train.os, "sched_getaffinity", lambda pid: cores)
    monkeypatch.setattr(cpu_ppo_train.os, "sched_setaffinity", lambda pid, cpus: calls.append(set(cpus)))
    cpu_ppo_train.pin(rank, world_size)
    assert calls == ([pinned] if pinned else [])
