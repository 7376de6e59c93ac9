"""Argument types more than one command declares (each command's own beside it, in its module)."""

from __future__ import annotations

import argparse

from harness.artifacts.figures import FAMILIES


def families(text: str) -> tuple[str, ...]:
    """``--judge``'s figure families (compare, gate): a name that is no family is refused at the command line."""
    if bad := [f for f in text.split(",") if f not in FAMILIES]:
        raise argparse.ArgumentTypeError(f"unknown figure families {bad}; expected some of {', '.join(FAMILIES)}")
    return tuple(text.split(","))
