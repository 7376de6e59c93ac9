"""``python -m harness baseline merge`` and ``calibrate``: results dirs merged into a baseline file, the figures
averaged; calibrate adds tolerances from the spread of N repeated runs (docs/gate-and-baselines.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import ValidationError

from harness.artifacts.figures import FAMILIES, family, fmt
from harness.errors import BaselineError
from harness.gate.baseline import DEFAULT_RULES, Baseline, ToleranceRule, build, max_rel_deviation
from harness.safeio import output_path


def _policy(args: argparse.Namespace) -> dict[str, ToleranceRule]:
    """``--k overhead=3 --floor disk=0.05`` on top of the defaults, validated as a baseline's policy is (a finite
    number not below 0: a NaN or a negative floor was once taken as it came)."""
    policy = {f: p.model_dump() for f, p in DEFAULT_RULES.items()}
    for attr in ("k", "floor"):
        for item in getattr(args, attr) or []:
            fam, _, value = item.partition("=")
            if fam not in FAMILIES or not value:
                raise BaselineError(
                    f"--{attr} {item!r}: expected FAMILY=NUMBER with FAMILY one of {', '.join(FAMILIES)}"
                )
            try:
                policy[fam][attr] = ToleranceRule.model_validate({**policy[fam], attr: value}).model_dump()[attr]
            except ValidationError as exc:
                raise BaselineError(f"--{attr} {item!r}: {exc.errors()[0]['msg']}") from None
    return {f: ToleranceRule.model_validate(p) for f, p in policy.items()}


def _print_tolerances(b: Baseline) -> None:
    for name, sb in b.scenarios.items():
        print(f"{name}: {sb.runs} run(s)")
        by_family: dict[str, list[tuple[str, float, float]]] = {}
        for metric, tol in sorted(sb.tolerances.items()):
            dev = max_rel_deviation(sb.samples.get(metric, []))
            by_family.setdefault(family(metric) or "?", []).append((metric, dev, tol))
        for fam, rows in by_family.items():
            p = b.policy[fam]
            if fam == "overhead":
                for metric, dev, tol in rows:
                    mean = sb.figures.get(metric)
                    print(
                        f"  {metric:<40} mean {fmt(metric, float(mean)) if isinstance(mean, int | float) else '-':>9}"
                        f"  max dev {100 * dev:5.1f}%  tolerance {100 * tol:5.1f}%"
                    )
            else:
                worst = max(rows, key=lambda r: r[1])
                print(
                    f"  {fam}: {len(rows)} metrics, largest deviation {100 * worst[1]:.2f}% ({worst[0]}), "
                    f"tolerances {100 * min(r[2] for r in rows):.1f}-{100 * max(r[2] for r in rows):.1f}% "
                    f"(k {p.k:g}, floor {100 * p.floor:g}%)"
                )


def cmd_merge(args: argparse.Namespace, calibrate: bool = False) -> int:
    previous_path = getattr(args, "tolerances_from", None)
    output = output_path(args.output, "-o", [*args.results, *([previous_path] if previous_path else [])])
    previous = Baseline.read(Path(previous_path)) if previous_path else None
    b = build([Path(d) for d in args.results], _policy(args), calibrate=calibrate, previous=previous)
    b.write(output)
    _print_tolerances(b)
    env = ", ".join(
        f"{k} {v}"
        for k, v in b.environment.items()
        if k in ("device_kind", "mindstudio-probe", "verl", "torch", "image")
    )
    print(f"wrote {args.output}: {len(b.scenarios)} scenarios, commit {(b.commit or '?')[:12]}; {env}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    return cmd_merge(args, calibrate=True)


def declare(sub: argparse._SubParsersAction) -> None:
    """``baseline merge``'s and ``calibrate``'s arguments, declared beside the commands (``harness.cli.parser``
    gathers every command's)."""
    p = sub.add_parser("baseline", help="baselines: merge results directories into one")
    bsub = p.add_subparsers(dest="baseline_command", required=True)
    m = bsub.add_parser("merge", help="merge results dirs (figures averaged) into a baseline file")
    m.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    m.add_argument("-o", "--output", required=True)
    m.add_argument("--tolerances-from", metavar="BASELINE", help="carry calibrated tolerances forward from a baseline")
    _policy_args(m)
    m.set_defaults(func=cmd_merge)
    p = sub.add_parser("calibrate", help="baseline plus tolerances from N repeated runs of the same scenarios")
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    p.add_argument("-o", "--output", required=True)
    _policy_args(p)
    p.set_defaults(func=cmd_calibrate)


def _policy_args(p: argparse.ArgumentParser) -> None:
    defaults = ", ".join(f"{f} k={v.k:g} floor={v.floor:g}" for f, v in DEFAULT_RULES.items())
    p.add_argument("--k", action="append", metavar="FAMILY=K", help=f"noise multiplier per family ({defaults})")
    p.add_argument("--floor", action="append", metavar="FAMILY=F", help="smallest relative tolerance per family")
