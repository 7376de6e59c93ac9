"""Tiny inputs for verl's real trainer on CPU, made locally (nothing is downloaded) and cached.

A BPE tokenizer trained with ``tokenizers`` on the data's own text, a randomly initialised Qwen2 saved with
``save_pretrained``, and gsm8k-format parquet files (verl's RL row layout, ``harness.training.workloads.gsm8k_data``)
of generated arithmetic questions. They live outside any results dir, in
``$HARNESS_ASSET_CACHE`` (default ``~/.cache/verl-msprobe-harness/assets``)/<hash of the settings>, made
once under a file lock and published by an atomic rename, so parallel runs never see half a directory.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from harness import config
from harness.scenario.settings.verl_ppo import TinyAssets
from harness.training.workloads.gsm8k_data import to_record

VERSION = 1  # bump when what is made changes, so caches are remade
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_ITEMS = ["apples", "books", "coins", "pencils", "stamps", "marbles"]
_NAMES = ["Ann", "Bob", "Chen", "Dana", "Eli", "Fay"]


@dataclass(frozen=True)
class AssetPaths:
    root: Path

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"


def cache_root() -> Path:
    return config.ASSET_CACHE.get().expanduser()


def paths(spec: TinyAssets) -> AssetPaths:
    key = json.dumps({"version": VERSION, **spec.model_dump()}, sort_keys=True)
    return AssetPaths(cache_root() / hashlib.sha256(key.encode()).hexdigest()[:16])


def ensure(spec: TinyAssets) -> AssetPaths:
    """The cached assets for ``spec``, made first if absent."""
    out = paths(spec)
    if out.root.is_dir():
        return out
    out.root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.root) + ".lock"):
        if not out.root.is_dir():
            tmp = Path(tempfile.mkdtemp(prefix=".making-", dir=out.root.parent))
            try:
                _make(spec, AssetPaths(tmp))
                tmp.rename(out.root)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


def _example(rng: random.Random) -> dict[str, str]:
    a, b = rng.randint(2, 60), rng.randint(2, 60)
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    question = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
    return {"question": question, "answer": f"{name} has {a} + {b} = {a + b} {item}.\n#### {a + b}"}


def _make(spec: TinyAssets, out: AssetPaths) -> None:
    import pandas as pd
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    rng = random.Random(spec.seed)
    splits = {"train": spec.train_rows, "test": spec.test_rows}
    rows = {split: [to_record(_example(rng), i, split) for i in range(n)] for split, n in splits.items()}
    out.data_dir.mkdir(parents=True)
    for split, records in rows.items():
        pd.DataFrame(records).to_parquet(out.data_dir / f"{split}.parquet")

    corpus = [r["prompt"][0]["content"] + " " + r["extra_info"]["answer"] for rs in rows.values() for r in rs]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=spec.model.vocab_size,
            special_tokens=SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )
    tokenizer.save_pretrained(out.model)

    torch.manual_seed(spec.seed)
    config = Qwen2Config(
        **{**spec.model.model_dump(), "vocab_size": len(tokenizer)},  # the trained tokenizer's, special tokens included
        tie_word_embeddings=False,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    Qwen2ForCausalLM(config).save_pretrained(out.model)
