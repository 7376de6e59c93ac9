"""The gsm8k data-preparation step: verl's RL parquet layout, scored by verl's own gsm8k reward."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = """---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
---
"""


def fake_raw_gsm8k(root: Path) -> Path:
    """A local copy shaped like the HF openai/gsm8k repo (what runners keep in ~/.cache/datasets)."""
    (root / "main").mkdir(parents=True)
    (root / "README.md").write_text(README)
    train = {"question": ["What is 2+3?", "How many?"], "answer": ["2+3=5\n#### 5", "a lot\n#### 1,234"]}
    pd.DataFrame(train).to_parquet(root / "main" / "train-00000-of-00001.parquet")
    pd.DataFrame({"question": ["Q?"], "answer": ["x\n#### -7"]}).to_parquet(
        root / "main" / "test-00000-of-00001.parquet"
    )
    return root


@pytest.mark.integration
def test_prepares_verl_rl_parquet_offline(tmp_path):
    raw, out = fake_raw_gsm8k(tmp_path / "raw"), tmp_path / "data" / "gsm8k"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    argv = [sys.executable, "-m", "harness.training.workloads.gsm8k_data", "--raw", str(raw), "--out", str(out)]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(out / "train.parquet"), str(out / "test.parquet")]

    rows = pd.read_parquet(out / "train.parquet")
    assert list(rows.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    row = rows.iloc[1]
    assert row["data_source"] == "openai/gsm8k" and row["ability"] == "math"
    assert row["prompt"][0]["role"] == "user" and row["prompt"][0]["content"].startswith("How many? ")
    assert row["reward_model"] == {"style": "rule", "ground_truth": "1234"}
    assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] == 1
    assert pd.read_parquet(out / "test.parquet").iloc[0]["reward_model"]["ground_truth"] == "-7"

    from verl.utils.reward_score import default_compute_score

    assert default_compute_score("openai/gsm8k", "so the answer is #### 1234", "1234") == 1.0
