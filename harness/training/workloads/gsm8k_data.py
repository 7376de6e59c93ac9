"""The data-preparation step of the verl_ppo scenarios: gsm8k as verl's RL parquet files.

verl's Ascend CI makes ``~/data/gsm8k/{train,test}.parquet`` on its runners with verl's
``examples/data_preprocess/gsm8k.py --local_dataset_path ~/.cache/datasets/openai/gsm8k``. That script is not
in verl's wheel, so the harness carries the same transformation (same record layout, same instruction text,
which verl's gsm8k reward relies on) as a module that runs wherever ``datasets`` is installed:

    python -m harness.training.workloads.gsm8k_data --raw ~/.cache/datasets/openai/gsm8k --out ~/data/gsm8k

``--raw`` is a local copy of the HF dataset (runners have no internet); without it, ``openai/gsm8k`` is
downloaded. Existing output files are kept unless ``--force``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

DATA_SOURCE = "openai/gsm8k"  # verl picks its gsm8k reward function by this name
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
SPLITS = {"train": "train.parquet", "test": "test.parquet"}
_ANSWER = re.compile(r"#### (-?[0-9.,]+)")


def final_answer(solution: str) -> str:
    """The number after ``####`` in a gsm8k solution, without thousands separators."""
    m = _ANSWER.search(solution)
    if m is None:
        raise ValueError(f"gsm8k solution without a '#### <number>' line: {solution[-80:]!r}")
    return m.group(1).replace(",", "")


def to_record(example: dict[str, Any], index: int, split: str) -> dict[str, Any]:
    """One gsm8k row as verl's RL dataset row (prompt as chat messages, rule-based reward target)."""
    question, answer = example["question"], example["answer"]
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": final_answer(answer)},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
    }


def prepare(raw: str | None, out: Path, force: bool = False) -> list[Path]:
    """Write ``out/train.parquet`` and ``out/test.parquet``; return their paths."""
    targets = {split: out / name for split, name in SPLITS.items()}
    if not force and all(p.is_file() for p in targets.values()):
        return list(targets.values())
    import datasets

    dataset = datasets.load_dataset(raw or DATA_SOURCE, "main")
    out.mkdir(parents=True, exist_ok=True)
    for split, path in targets.items():
        rows = dataset[split].map(
            lambda ex, i, split=split: to_record(ex, i, split),
            with_indices=True,
            remove_columns=dataset[split].column_names,
        )
        rows.to_parquet(str(path))
    return list(targets.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.training.workloads.gsm8k_data", description=__doc__)
    parser.add_argument("--raw", help="local copy of the HF openai/gsm8k dataset (default: download it)")
    parser.add_argument("--out", required=True, type=Path, help="directory for train.parquet and test.parquet")
    parser.add_argument("--force", action="store_true", help="rewrite existing files")
    args = parser.parse_args(argv)
    for path in prepare(args.raw, args.out.expanduser(), args.force):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
