"""The dense reward of the CPU scenarios (``reward.custom_reward_function``).

verl's gsm8k reward gives a random model 0 on every sample, so GRPO's advantages, the loss and every
gradient are 0 and the actor's backward statistics are all zeros: a dump that cannot show a broken backward.
This adds the fraction of digits in the response and its share of distinct characters, which differ
between any two different samples of one prompt (GRPO's advantage is the score minus the prompt's mean).
"""

from __future__ import annotations

from typing import Any


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any) -> float:
    from verl.utils.reward_score import gsm8k

    n = max(len(solution_str), 1)
    digits = sum(c.isdigit() for c in solution_str) / n
    return float(gsm8k.compute_score(solution_str, ground_truth)) + digits + 0.5 * len(set(solution_str)) / n
