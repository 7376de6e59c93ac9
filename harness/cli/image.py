"""``python -m harness image build-cpu`` / ``ascend-context``: container images for the docker executor. The docker
SDK is imported only when one of them runs; what an image is and how it is made are the executors'
(``harness.training.executors.docker_image``, ``ascend_image``), what the command says is here."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from harness import outcomes
from harness.errors import InfraError
from harness.pipeline import options as shared
from harness.safeio import output_path
from harness.scenario.model import ExecutorSettings
from harness.targets.spec import parse_target


def cmd_build_cpu(args: argparse.Namespace) -> int:
    """``python -m harness image build-cpu [--tag T] [--check]``."""
    from harness.training.executors.docker_image import build_cpu_image, smoke_check
    from harness.training.executors.docker_options import HOST_PYTHON, IMAGE_KIND_LABEL
    from harness.training.executors.docker_spec import host_python

    try:
        image_id = build_cpu_image(args.tag)
    except InfraError as exc:
        print(f"INFRASTRUCTURE ERROR {exc}", file=sys.stderr)
        return outcomes.EXIT_ERROR
    print(f"built {args.tag} ({image_id[:19]}): bare rootfs, label {IMAGE_KIND_LABEL}={HOST_PYTHON}")
    print("the docker executor mounts read-only: " + " ".join(host_python().paths))
    if args.check:
        print(smoke_check(args.tag))
    return 0


def cmd_ascend_context(args: argparse.Namespace) -> int:
    """``python -m harness image ascend-context --verl SPEC --out DIR``: the context, then the build command."""
    from harness.training.executors.ascend_image import CONTEXT_FILES, ROOT, VERL_SRC, make_context
    from harness.training.executors.docker_options import TARGET_LABEL

    target = parse_target(args.verl, args.msprobe, args.series)
    extra = dict(kv.split("=", 1) for kv in args.build_arg)
    copied = [ROOT / name for name in CONTEXT_FILES] + ([Path(target.verl.source)] if target.verl.source else [])
    out = output_path(args.out, "--out", copied, directory=True)
    build = make_context(target, out, args.tag, args.base_tag, extra)
    print(f"context {build.context}: the harness and {target.verl.describe()} in {VERL_SRC}/")
    if not args.build:
        print(f"the image will carry {TARGET_LABEL}={target.verl.identity}; build it on the runner with:")
        print(shlex.join(build.argv()))
        return 0
    print(f"building {args.tag} ({TARGET_LABEL}={target.verl.identity}): {shlex.join(build.argv())}", flush=True)
    if subprocess.run(build.argv(), check=False).returncode != 0:
        raise InfraError(f"docker build of {args.tag} for {target.verl.identity} failed (its output is above)")
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``image``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("image", help="make container images for the docker executor")
    isub = p.add_subparsers(dest="image_command", required=True)
    p = isub.add_parser("build-cpu", help="import a bare rootfs image that runs this venv (no registry; CI uses it)")
    p.add_argument("--tag", default=ExecutorSettings().options("docker").image)
    p.add_argument("--check", action="store_true", help="then import torch, msprobe, verl and harness inside it")
    p.set_defaults(func=cmd_build_cpu)
    p = isub.add_parser("ascend-context", help="the Ascend image's build context for a verl under test, and its build")
    shared.add(p.add_argument, shared.TARGET)
    p.add_argument("--out", required=True, help="an empty dir for the build context")
    p.add_argument("--tag", default="verl-msprobe-harness:ascend-target")
    p.add_argument("--build", action="store_true", help="then run docker build (Ascend runners)")
    p.add_argument("--base-tag", help="the base image's tag to build on (default: Dockerfile.ascend's)")
    p.add_argument(
        "--build-arg",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="one more Dockerfile.ascend ARG (VERL_ASCEND_IMAGE, PIP_INDEX_URL, PIP_TRUSTED_HOST, VERL_NO_DEPS_EXTRAS)",
    )
    p.set_defaults(func=cmd_ascend_context)


def _key_value(text: str) -> str:
    if "=" not in text or not text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return text
