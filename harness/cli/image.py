"""``python -m harness image build-cpu`` / ``ascend-context``: container images for the docker executor. The docker
SDK is imported only when one of them runs."""

from __future__ import annotations

import argparse


def cmd_build_cpu(args: argparse.Namespace) -> int:
    from harness.training.executors.docker_image import cmd_build_cpu

    return cmd_build_cpu(args)


def cmd_ascend_context(args: argparse.Namespace) -> int:
    from harness.training.executors.ascend_image import cmd_ascend_context

    return cmd_ascend_context(args)
