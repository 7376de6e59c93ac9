"""verl's replay buffer, handing the trainer each step's batch in one order (verl's documented extension point
``trainer.v1.sampler.custom_sampler``): the CPU tier's runs repeatable, so numerics can be judged run against run.

verl's v1 trainer stores a trajectory in TransferQueue when its rollout finishes and samples a step's batch in that
order, so two runs of one scenario train on the same samples in different orders: other micro-batches, other sums,
from step 2 other weights and other rollouts (real_fsdp_l0 against itself: 367 of 1172 rows error at step 2, first at
the embedding's input). Ordered by the samples' tokens (prompt and response), the batch is the same in every run
whose rollouts are (the CPU rollout seeds each sample: verl_cpu.rollout). Only the order changes: the same samples,
the same groups, the same advantages.
"""

from __future__ import annotations

from typing import Any

import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer


class OrderedReplayBuffer(ReplayBuffer):
    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict[str, Any]]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if len(batch.keys) < 2:
            return batch, metrics
        ids = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["input_ids"])
        tokens = [tuple(row.tolist()) for row in ids["input_ids"].unbind(0)]
        order = sorted(range(len(batch.keys)), key=lambda i: tokens[i])
        ordered = KVBatchMeta(
            keys=[batch.keys[i] for i in order],
            tags=[batch.tags[i] for i in order],
            partition_id=batch.partition_id,
            fields=batch.fields,
            extra_info=batch.extra_info,
        )
        return ordered, metrics
