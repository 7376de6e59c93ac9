"""Baseline, gate and report commands: ``baseline merge``, ``calibrate``, ``gate``, ``report``, ``junit-merge``.

Exit codes as everywhere in the harness (``harness.outcomes``): 0 good; 1 a regression; 2 invalid input, an error
or nothing compared; 3 inconclusive.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import ValidationError

from harness.artifacts.figures import FAMILIES, family, fmt
from harness.errors import BaselineError, HarnessError
from harness.gate.baseline import DEFAULT_POLICY, Baseline, Policy, build, max_rel_deviation
from harness.gate.files import GateDoc
from harness.gate.judge import gate
from harness.gate.observe import Observation, observe_dir
from harness.safeio import MB, output_path, read_text


def _policy(args: argparse.Namespace) -> dict[str, Policy]:
    """``--k overhead=3 --floor disk=0.05`` on top of the defaults, validated as a baseline's policy is (a finite
    number not below 0: a NaN or a negative floor was once taken as it came)."""
    policy = {f: p.model_dump() for f, p in DEFAULT_POLICY.items()}
    for attr in ("k", "floor"):
        for item in getattr(args, attr) or []:
            fam, _, value = item.partition("=")
            if fam not in FAMILIES or not value:
                raise BaselineError(
                    f"--{attr} {item!r}: expected FAMILY=NUMBER with FAMILY one of {', '.join(FAMILIES)}"
                )
            try:
                policy[fam][attr] = Policy.model_validate({**policy[fam], attr: value}).model_dump()[attr]
            except ValidationError as exc:
                raise BaselineError(f"--{attr} {item!r}: {exc.errors()[0]['msg']}") from None
    return {f: Policy.model_validate(p) for f, p in policy.items()}


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


def cmd_gate(args: argparse.Namespace) -> int:
    output = output_path(args.json, "--json", [args.baseline, *args.results]) if args.json else None
    baseline = Baseline.read(Path(args.baseline))
    results = [Path(r) for r in args.results]
    observations: dict[str, Observation] = {}
    for d in results:
        observations.update(observe_dir(d))
    judgement = gate(baseline, observations, across_env=args.compare_across_env)
    for line in judgement.lines():
        print(line)
    if output:
        GateDoc.of_judgement(judgement, baseline, observations, results).write(output)
    return judgement.exit_code


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import build_report  # matplotlib only for this command

    inputs = [*args.results, *(args.gate or [])]
    out = output_path(args.out, "--out", inputs, directory=True)
    gates = [GateDoc.read(Path(g)) for g in args.gate or []]
    rep = build_report([Path(r) for r in args.results], out, gates)
    print(f"summary: {rep.summary}\ntables:  {rep.tables}")
    for p in rep.pngs:
        print(f"plot:    {p}")
    return 0


def cmd_junit_merge(args: argparse.Namespace) -> int:
    from harness.report.junit import merge_junit

    inputs = [Path(p) for p in args.inputs]
    if missing := [str(p) for p in inputs if not p.is_file()]:
        raise HarnessError(f"no such JUnit file: {', '.join(missing)}")
    written, folded = merge_junit(inputs, output_path(args.output, "OUT", inputs))
    print(f"wrote {args.output}: {written} testcases from {len(inputs)} file(s), {folded} duplicates folded")
    return 0


MAX_MARKDOWN = 16 * MB


def cmd_github(args: argparse.Namespace) -> int:
    from harness.report.github import annotation_lines, load, summary  # matplotlib (harness.report) only when used

    doc = load(Path(args.json))
    if args.what == "annotations":
        for line in annotation_lines(doc):
            print(line)
    else:
        md = read_text(Path(args.markdown), MAX_MARKDOWN) if args.markdown else ""
        print(summary(doc, md, args.heading), end="")
    return 0


def _policy_args(p: argparse.ArgumentParser) -> None:
    defaults = ", ".join(f"{f} k={v.k:g} floor={v.floor:g}" for f, v in DEFAULT_POLICY.items())
    p.add_argument("--k", action="append", metavar="FAMILY=K", help=f"noise multiplier per family ({defaults})")
    p.add_argument("--floor", action="append", metavar="FAMILY=F", help="smallest relative tolerance per family")


def add_gate_commands(sub: argparse._SubParsersAction) -> None:
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
    p.set_defaults(func=lambda a: cmd_merge(a, calibrate=True))

    p = sub.add_parser(
        "gate", help="compare results against a baseline; exit 1 on a regression, 3 when the noise leaves one undecided"
    )
    p.add_argument("--baseline", required=True)
    p.add_argument("--results", required=True, nargs="+", metavar="RESULTS_DIR")
    p.add_argument("--compare-across-env", action="store_true", help="compare even across device kind / msprobe")
    p.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("report", help="markdown summary, PNG per scenario and verl's doc tables")
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    p.add_argument(
        "--gate",
        action="append",
        metavar="GATE_JSON",
        help="what `gate --json` decided for these results dirs (repeatable: one per gate run); the report never "
        "judges again",
    )
    p.add_argument("--out", default="report")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("junit-merge", help="merge JUnit files: each testcase once, with its properties")
    p.add_argument("output", metavar="OUT")
    p.add_argument("inputs", nargs="+", metavar="IN")
    p.set_defaults(func=cmd_junit_merge)

    p = sub.add_parser(
        "github",
        help="what a GitHub job publishes of compare.json or a gate's JSON (stdout): annotations (::error lines, "
        "one per finding) or the step summary",
    )
    p.add_argument("what", choices=["annotations", "summary"])
    p.add_argument("json", metavar="JSON", help="compare.json, or the file of `harness gate --json`")
    p.add_argument("--markdown", metavar="MD", help="summary: the report below the verdict (report/summary.md)")
    p.add_argument("--heading", default="", help="summary: a heading above the verdict")
    p.set_defaults(func=cmd_github)
