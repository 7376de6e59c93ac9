"""The host paths one run reads (model, data), mounted read-only into a container, and how to make the data."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.scenario.settings.verl_ppo import VerlPpoSettings
from harness.training.workloads.verl_cpu import assets

_VAR = re.compile(r"\$\{(?P<name>\w+)(?::-(?P<default>[^}]*))?\}|\$(?P<bare>\w+)")


def expand_path(text: str, environ: Mapping[str, str] | None = None) -> Path:
    """Shell-style ``${VAR:-default}``, ``${VAR}``, ``$VAR`` and ``~``, expanded on the host at launch time.

    Why not os.path.expandvars: it has no ``:-default``, and the defaults here are the runner caches."""
    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        name = m["name"] or m["bare"]
        value = env.get(name, "")
        if value or m["name"] is None:
            return value
        return m["default"] or ""

    return Path(os.path.expanduser(_VAR.sub(sub, text)))


@dataclass(frozen=True)
class Inputs:
    """The host paths one run reads (mounted read-only into the container)."""

    model: Path
    data_dir: Path
    train: Path
    val: Path
    raw_dataset: Path

    @classmethod
    def of(cls, s: VerlPpoSettings) -> Inputs:
        if s.tiny is not None:  # made as train.parquet and test.parquet, the defaults of train_file and val_file
            made = assets.paths(s.tiny)
            model, data, raw = made.model, made.data_dir, made.root
        else:
            model, data, raw = expand_path(s.model_path), expand_path(s.data_dir), expand_path(s.raw_dataset)
        return cls(model, data, data / s.train_file, data / s.val_file, raw)

    def missing(self) -> list[str]:
        out = [
            f"{what} {p}"
            for what, p in (("model", self.model), ("train data", self.train), ("val data", self.val))
            if not p.exists()
        ]
        for p in (self.model, self.data_dir):
            if not p.is_absolute():
                out.append(f"{p} is not an absolute path after expansion")
        return out

    def prepare_data_argv(self, python: str = "python") -> list[str]:
        """The data-preparation step (verl's examples/data_preprocess/gsm8k.py, as the harness module)."""
        return [
            python,
            "-m",
            "harness.training.workloads.gsm8k_data",
            "--raw",
            str(self.raw_dataset),
            "--out",
            str(self.data_dir),
        ]
