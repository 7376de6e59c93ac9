"""The build context and ``docker build`` arguments of the Ascend image for a verl under test.

docker/Dockerfile.ascend installs the verl found in the context dir named by ``VERL_SRC`` over the base image's
verl (without dependencies: the base image's CANN, torch and torch_npu stay) and labels the image with the
target's identity (``io.harness.target.verl``), which the docker executor reads back before every run: a
self-contained image that holds another verl is an infrastructure error, not a silent test of the wrong code.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.targets.environment import source_tree
from harness.targets.spec import Target, TargetError

ROOT = Path(__file__).resolve().parents[3]
CONTEXT_FILES = ("pyproject.toml", "README.md", "harness", "docker/ascend-entrypoint.sh", "docker/Dockerfile.ascend")
VERL_SRC = "verl-src"


@dataclass(frozen=True)
class AscendBuild:
    context: Path
    build_args: dict[str, str]
    tag: str

    def argv(self) -> list[str]:
        args = [a for k, v in self.build_args.items() for a in ("--build-arg", f"{k}={v}")]
        dockerfile = str(self.context / "docker" / "Dockerfile.ascend")
        return ["docker", "build", "-f", dockerfile, *args, "-t", self.tag, str(self.context)]


def build_args(target: Target) -> dict[str, str]:
    """What the harness passes: where the verl source is in the context, the identity to label the image with."""
    if target.msprobe.kind not in ("pinned", "release"):
        raise TargetError("the Ascend image takes an msprobe version (--msprobe X.Y.Z), not a wheel")
    args = {
        "VERL_SRC": VERL_SRC,
        "HARNESS_TARGET_VERL": target.verl.identity,
        "HARNESS_TARGET_SERIES": target.series,
    }
    if target.msprobe.kind == "release":
        args["MSPROBE_VERSION"] = str(target.msprobe.version)
    return args


def make_context(
    target: Target, out: Path, tag: str, base_tag: str | None = None, extra: dict[str, str] | None = None
) -> AscendBuild:
    """The build context: the harness's files plus the target's verl (a source tree or its wheel) in verl-src/.
    ``extra``: more of Dockerfile.ascend's build arguments (the base image, the package index, the --no-deps pins)."""
    if target.verl.kind in ("pinned", "release"):
        raise TargetError(
            "a released verl is the base image's own: pick its VERL_ASCEND_TAG instead (docker/README.md)"
        )
    declared = {
        ln.split()[1].split("=")[0]
        for ln in (ROOT / "docker" / "Dockerfile.ascend").read_text().splitlines()
        if ln.startswith("ARG ")
    }
    if unknown := sorted(set(extra or {}) - declared):
        raise TargetError(f"--build-arg {', '.join(unknown)}: docker/Dockerfile.ascend declares no such ARG")
    args = build_args(target) | ({"VERL_ASCEND_TAG": base_tag} if base_tag else {}) | (extra or {})
    if out.exists() and any(out.iterdir()):
        raise TargetError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    for name in CONTEXT_FILES:
        src, dst = ROOT / name, out / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(source_tree(target.verl, Path(tmp)))
        if src.is_file():  # a wheel
            (out / VERL_SRC).mkdir()
            shutil.copy2(src, out / VERL_SRC / src.name)
        else:  # its links as links: source_tree made them relative, inside the tree
            shutil.copytree(src, out / VERL_SRC, symlinks=True)
    return AscendBuild(out, args, tag)
