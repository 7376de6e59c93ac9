"""How long a training may run: its scenario's ``executor.timeout_s``, the job's cap on any one training
(``HARNESS_MAX_TRAINING_S``, set by a workflow job), and what is left of the job (``HARNESS_DEADLINE``, the epoch
second its main step must end by: ``python3 -m harness.job run --minutes M`` sets it for the step it runs).

A job's timeouts once added up past its ``timeout-minutes``: GitHub cancelled the job, mid-training, before the
harness could say why. Capped by what is left of the job (less ``REPORT_RESERVE_S`` for the numerics and the
reports after the last training), a training is stopped by the harness, which says so (a timeout is infrastructure,
never a verdict on verl), and none is started when the job has no time left for one.
"""

from __future__ import annotations

import time

from harness import config
from harness.errors import InfraError

REPORT_RESERVE_S = 120  # the numerics and the reports after the last training (measured 7-24 s: docs/cpu-gate.md)
MIN_TRAINING_S = 30  # less left than this: no training is started


def job_left(now: float | None = None) -> float | None:
    """Seconds the job has left for trainings (its deadline less the reports' reserve); None: no deadline given."""
    if (deadline := config.DEADLINE.get()) is None:
        return None
    return deadline - (time.time() if now is None else now) - REPORT_RESERVE_S


def training_limit(timeout_s: float, now: float | None = None) -> tuple[float, str]:
    """The seconds a training may run, and what set them (its line when it times out)."""
    limits = [(timeout_s, "executor.timeout_s")]
    if (cap := config.MAX_TRAINING_S.get()) is not None:
        limits.append((cap, f"{config.MAX_TRAINING_S.name}, the job's cap on a training"))
    if (deadline := config.DEADLINE.get()) is not None:
        left = deadline - (time.time() if now is None else now) - REPORT_RESERVE_S
        if left < MIN_TRAINING_S:
            raise InfraError(
                f"the job's time is spent ({config.DEADLINE.name}: {max(left, 0):.0f} s left after the reports' "
                f"{REPORT_RESERVE_S} s): no training started; not a verdict on verl (a slower runner, or more runs "
                "than the job's minutes afford)"
            )
        limits.append((left, f"{config.DEADLINE.name}, what is left of the job"))
    return min(limits)
