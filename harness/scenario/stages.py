"""Stage names of verl's precision_debugger integration and how they map to verl's step timers."""

from __future__ import annotations

from typing import Literal, get_args

Stage = Literal[
    "actor_compute_log_prob",
    "ref_compute_log_prob",
    "actor_update",
    "compute_values",
    "critic_update",
    "compute_rm_score",
]

STAGES: tuple[str, ...] = get_args(Stage)

# Stages that run without autograd: their dumps must hold forward entries only.
NO_GRAD_STAGES = frozenset({"actor_compute_log_prob", "ref_compute_log_prob", "compute_values", "compute_rm_score"})

# verl's RayPPOTrainer timer names (``timing_s/<name>``) -> the stage each one times.
TIMER_TO_STAGE: dict[str, str] = {
    "old_log_prob": "actor_compute_log_prob",
    "ref": "ref_compute_log_prob",
    "values": "compute_values",
    "update_critic": "critic_update",
    "update_actor": "actor_update",
    "reward": "compute_rm_score",
}
