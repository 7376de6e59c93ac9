"""Issues #73's and #84's acceptance, run by hand: the harness after an architecture change (#73: one session, one
read; #84: one orchestrator, each dump opened once and its facts stored) against the harness before it, each a git
checkout run with this venv's Python (``PYTHONPATH=<checkout>``).

Not a test: each subcommand trains or reads for minutes. The claims and the subcommand that checks each:

    # results recorded before (HARNESS_TIMING=record, `harness run` or pytest) give the same results.json after,
    # re-checked with --reuse (HARNESS_TIMING=record, as recorded): the recorded dir is copied to --out less its
    # results.json files, which the re-check writes anew; the recorded dir is never written
    .venv/bin/python benchmarks/architecture_check.py recheck --front run --recorded BEFORE/run \
        --checkout AFTER --out /tmp/recheck-run
    .venv/bin/python benchmarks/architecture_check.py recheck --front pytest --recorded BEFORE/pytest \
        --checkout AFTER --out /tmp/recheck-pytest
    # the numerics CSVs byte-identical on benchmarks/numerics_compare.py's generated pair
    .venv/bin/python benchmarks/architecture_check.py numerics --before BEFORE --after AFTER --out /tmp/numerics
    # a tiny `harness compare`'s wall time and the numerics compare's dump reading, before/after interleaved
    .venv/bin/python benchmarks/architecture_check.py time --before BEFORE --after AFTER --runs 3
    # the dump.json opens of the harness's own process (an audit hook): a tiny compare (2 runs a side), then a
    # night's later steps on its results dirs (baseline merge, gate, report, history append), each checkout in turn
    .venv/bin/python benchmarks/architecture_check.py opens --before BEFORE --after AFTER --out /tmp/opens

Each checkout runs its own benchmarks/numerics_compare.py ``--child harness`` (the numerics compare alone, in a fresh
process): a change that moves the numerics internals keeps that child working.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

from numerics_compare import _pair
from pydantic import ByteSize, TypeAdapter

# results.json leaves that may differ after the change: the schema number and the harness's own commit (its
# version). results.json holds no timestamp (the runs' wall times are the recorded ones, reused).
IGNORED = frozenset({("schema_version",), ("environment", "harness")})
FRONTS = ("run", "pytest")
TINY = "scenarios/tiny_fsdp_l0.yaml"  # the compare timed: one rank, 5 steps, 6 dumps (about 3 minutes on 2 cores)
PAIR_SIZE = "16MB"  # numerics_compare.py's default size: a pair msprobe's own compare also affords


def _env(checkout: Path) -> dict[str, str]:
    """The environment of a child run under ``checkout``: its harness first on the path, timing recorded (the CI's
    shared-runner mode the recordings were made in)."""
    return {**os.environ, "PYTHONPATH": str(checkout), "HARNESS_TIMING": "record"}


def _run(argv: list[str], checkout: Path, log: Path) -> int:
    """``argv`` under ``checkout`` (its working directory), output to ``log``; the exit code."""
    with log.open("w") as out:
        return subprocess.run(argv, cwd=checkout, env=_env(checkout), stdout=out, stderr=subprocess.STDOUT).returncode


def _checkout(text: str) -> Path:
    path = Path(text).resolve()
    if not (path / "harness" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{text}: not a harness checkout (no harness/__init__.py)")
    return path


def _leaves(doc: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key path, value) of every leaf of a JSON document; a list is one leaf (its order is part of its value)."""
    if isinstance(doc, dict) and doc:
        for key, value in doc.items():
            yield from _leaves(value, (*at, key))
    else:
        yield at, doc


def _differing(before: Any, after: Any) -> list[str]:
    """The key paths (``/``-joined: figure names hold dots) whose values differ, those in IGNORED left out."""
    a, b = dict(_leaves(before)), dict(_leaves(after))
    absent = object()  # a leaf on one side only differs, whatever the other side holds
    keys = (k for k in a.keys() | b.keys() if k not in IGNORED and a.get(k, absent) != b.get(k, absent))
    return sorted("/".join(k) for k in keys)


def recheck(args: argparse.Namespace) -> int:
    """Copy the recorded results less their results.json, re-run their scenarios with --reuse under the checkout
    (trainings reused, every check run again), diff each results.json written against the recorded one."""
    recorded, out = args.recorded.resolve(), args.out.resolve()
    if out.exists():
        raise SystemExit(f"--out {out}: exists; name a new directory (the copy is made there)")
    names = sorted(p.parent.name for p in recorded.glob("*/results.json"))
    if not names:
        raise SystemExit(f"--recorded {recorded}: no <scenario>/results.json in it")
    scenarios = [args.checkout / "scenarios" / f"{n}.yaml" for n in names]
    if missing := [str(s) for s in scenarios if not s.is_file()]:
        raise SystemExit(f"--checkout {args.checkout}: no scenario file {', '.join(missing)}")
    shutil.copytree(recorded, out, symlinks=True)
    for name in names:  # written anew by the re-check, never passed through from the recording
        (out / name / "results.json").unlink()
    if args.front == "run":
        argv = ["-m", "harness", "run", *map(str, scenarios), "--results", str(out), "--reuse"]
    else:
        argv = ["-m", "pytest", *map(str, scenarios), "-p", "no:cacheprovider", "--harness-results", str(out)]
        argv.append("--harness-reuse")
    log = out.parent / f"{out.name}.log"
    rc = _run([sys.executable, *argv], args.checkout, log)
    print(f"{args.front} --reuse under {args.checkout}: exit {rc} (output: {log})")
    failed = rc != 0
    for name in names:
        was = json.loads((recorded / name / "results.json").read_text())
        path = out / name / "results.json"
        now = json.loads(path.read_text()) if path.is_file() else None
        keys = ["(no results.json written)"] if now is None else _differing(was, now)
        failed |= bool(keys)
        print(f"{name}/results.json: " + (f"differs: {', '.join(keys)}" if keys else "identical"))
    return int(failed)


def _child(checkout: Path, base: Path, head: Path, out: Path) -> dict[str, Any]:
    """The checkout's numerics compare of head against base (numerics_compare.py's order) into ``out``, in a fresh
    process: its printed figures (seconds: wall; own: CPU seconds of the compare after its imports)."""
    argv = [sys.executable, str(checkout / "benchmarks" / "numerics_compare.py"), "--child", "harness"]
    proc = subprocess.run(
        [*argv, str(head), str(base), str(out)], env=_env(checkout), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: numerics_compare.py --child failed: {proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _pair_of(root: Path) -> tuple[Path, Path]:
    """numerics_compare.py's generated base and head trees of PAIR_SIZE (seeded: the same bytes every time)."""
    return _pair(root, TypeAdapter(ByteSize).validate_python(PAIR_SIZE))


def numerics(args: argparse.Namespace) -> int:
    """Both checkouts' numerics CSVs on the same generated pair, byte-compared file by file."""
    out = args.out.resolve()
    if out.exists():
        raise SystemExit(f"--out {out}: exists; name a new directory")
    base, head = _pair_of(out / "pair")
    for side, checkout in (("before", args.before), ("after", args.after)):
        r = _child(checkout, base, head, out / side)
        print(f"{side} ({checkout}): {r['rows']} rows, {r['seconds']:.2f}s wall, {r['own']:.2f}s CPU")
    csvs = {side: {p.relative_to(out / side) for p in (out / side).rglob("*.csv")} for side in ("before", "after")}
    failed = not csvs["before"]
    for rel in sorted(csvs["before"] | csvs["after"]):
        if rel not in csvs["before"] or rel not in csvs["after"]:
            word = f"only {'after' if rel in csvs['after'] else 'before'}"
        else:
            word = (
                "byte-identical" if filecmp.cmp(out / "before" / rel, out / "after" / rel, shallow=False) else "differs"
            )
        failed |= word != "byte-identical"
        print(f"{rel}: {word}")
    print(f"{len(csvs['before'])} CSVs before, {len(csvs['after'])} after: {'DIFFER' if failed else 'byte-identical'}")
    return int(failed)


def _compare_once(checkout: Path, tmp: Path) -> tuple[float, int]:
    """Wall seconds and exit code of one tiny compare under ``checkout``: base and head both this venv's verl."""
    verl = version("verl")
    results = Path(tempfile.mkdtemp(dir=tmp))
    argv = [sys.executable, "-m", "harness", "compare", TINY, "--base", verl, "--head", verl]
    argv += ["--repeats", "2", "--max-repeats", "2", "--results", str(results)]
    started = time.monotonic()
    rc = _run(argv, checkout, results.with_suffix(".log"))
    seconds = time.monotonic() - started
    if rc not in (0, 1, 3):  # a verdict (pass, regression, inconclusive); anything else did not compare
        raise SystemExit(f"{checkout}: compare exited {rc}: {results.with_suffix('.log')}")
    shutil.rmtree(results)
    return seconds, rc


def _median_line(what: str, before: list[float], after: list[float]) -> str:
    b, a = statistics.median(before), statistics.median(after)
    return f"{what}: before {b:.2f}s, after {a:.2f}s (median of {len(before)}), after/before {a / b:.3f}"


def timing(args: argparse.Namespace) -> int:
    """The tiny compare, then the numerics compare of the generated pair, each checkout in turn ``--runs`` times."""
    sides = (("before", args.before), ("after", args.after))
    walls: dict[str, list[float]] = {"before": [], "after": []}
    reads: dict[str, list[float]] = {"before": [], "after": []}
    cpus: dict[str, list[float]] = {"before": [], "after": []}
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory(prefix="architecture-check-") as tmp:
        for i in range(args.runs):
            for side, checkout in sides:
                seconds, rc = _compare_once(checkout, Path(tmp))
                walls[side].append(seconds)
                print(f"compare {i + 1} {side}: {seconds:.1f}s wall, exit {rc}", flush=True)
        base, head = _pair_of(Path(tmp) / "pair")
        for i in range(args.runs):
            for side, checkout in sides:
                r = _child(checkout, base, head, Path(tmp) / f"{side}{i}")
                reads[side].append(r["seconds"])
                cpus[side].append(r["own"])
                print(f"numerics {i + 1} {side}: {r['seconds']:.2f}s wall, {r['own']:.2f}s CPU", flush=True)
    print(_median_line(f"tiny compare ({TINY}, --repeats 2), wall", walls["before"], walls["after"]))
    print(_median_line(f"numerics compare of the {PAIR_SIZE} pair, wall", reads["before"], reads["after"]))
    print(_median_line(f"numerics compare of the {PAIR_SIZE} pair, CPU", cpus["before"], cpus["after"]))
    return 0


# Run first in each child: counts every open of a path ending in dump.json by the harness's own process (builtins.open,
# os.open, C code alike: the "open" audit event), written as JSON to $OPENS_OUT at exit. A training's processes are
# children of their own, not counted.
BOOT = """
import atexit, collections, json, os, runpy, sys
opens = collections.Counter()
def audit(event, args):
    if event == "open" and isinstance(args[0], str | bytes) and os.fsdecode(args[0]).endswith("dump.json"):
        opens[os.fsdecode(args[0])] += 1
sys.addaudithook(audit)
out = os.environ.pop("OPENS_OUT")
atexit.register(lambda: open(out, "w").write(json.dumps(opens)))
sys.argv = ["harness", *sys.argv[1:]]
runpy.run_module("harness", run_name="__main__", alter_sys=True)
"""


def _counted(checkout: Path, argv: list[str], out: Path, name: str) -> tuple[int, float, dict[str, int]]:
    """``python -m harness ARGV`` under ``checkout`` with the opens counted: exit code, wall seconds, opens by path."""
    counts = out / f"{name}.opens.json"
    env = {**_env(checkout), "OPENS_OUT": str(counts)}
    started = time.monotonic()
    with (out / f"{name}.log").open("w") as log:
        argv = [sys.executable, "-c", BOOT, *argv]
        rc = subprocess.run(argv, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - started
    return rc, seconds, json.loads(counts.read_text()) if counts.is_file() else {}


def _said(opens: dict[str, int], dumps: list[str]) -> str:
    """How often each dump was opened: ``N dumps: opened K times xM``, then the total."""
    per = Counter(opens.get(d, 0) for d in dumps)
    return ", ".join(f"opened {k} time{'s' * (k != 1)} x{n}" for k, n in sorted(per.items())) + (
        f" ({sum(opens.values())} opens in all)"
    )


def opens(args: argparse.Namespace) -> int:
    """Each checkout: a tiny compare (2 runs a side, no more) with its dump.json opens counted, then a night's later
    steps on its results dirs (base's two runs merged into a baseline, head's first gated against it, reported and
    appended to a new history), each counted."""
    out = args.out.resolve()
    if out.exists():
        raise SystemExit(f"--out {out}: exists; name a new directory")
    verl = version("verl")
    for side, checkout in (("before", args.before), ("after", args.after)):
        where = out / side
        where.mkdir(parents=True)
        results = where / "compare"
        argv = ["compare", TINY, "--base", verl, "--head", verl, "--repeats", "2", "--max-repeats", "2"]
        rc, seconds, counted = _counted(checkout, [*argv, "--results", str(results)], where, "compare")
        dumps = sorted(str(p) for p in results.rglob("dump.json"))
        print(f"{side} ({checkout}): compare exit {rc}, {seconds:.1f}s wall, {len(dumps)} dump.json: "
              f"{_said(counted, dumps)}", flush=True)  # fmt: skip
        runs = {f"{s}/r{i}": results / s / f"r{i}" for s in ("base", "head") for i in (0, 1)}
        steps = {
            "baseline merge": ["baseline", "merge", str(runs["base/r0"]), str(runs["base/r1"]), "-o",
                               str(where / "baseline.json")],
            "gate": ["gate", "--baseline", str(where / "baseline.json"), "--results", str(runs["head/r0"]),
                     "--json", str(where / "gate.json")],
            "report": ["report", str(runs["head/r0"]), "--gate", str(where / "gate.json"), "--out",
                       str(where / "report")],
            "history append": ["history", "append", str(where / "history.json"), str(runs["head/r0"])],
        }  # fmt: skip
        for step, step_argv in steps.items():
            rc, seconds, counted = _counted(checkout, step_argv, where, step.replace(" ", "_"))
            print(f"{side}: {step}: exit {rc}, {seconds:.1f}s wall, {_said(counted, dumps)}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("recheck", help="re-run recorded results with --reuse under a checkout, diff results.json")
    r.add_argument("--front", choices=FRONTS, required=True, help="the front end that recorded them")
    r.add_argument("--recorded", type=Path, required=True, help="the recorded results dir (read only)")
    r.add_argument("--checkout", type=_checkout, required=True, help="the harness checkout to re-check with")
    r.add_argument("--out", type=Path, required=True, help="a new dir: the copy re-checked (its log beside it)")
    r.set_defaults(func=recheck)
    n = sub.add_parser("numerics", help="both checkouts' numerics CSVs on the generated pair, byte-compared")
    n.add_argument("--out", type=Path, required=True, help="a new dir: the pair and both sides' CSVs")
    t = sub.add_parser("time", help="a tiny compare and the numerics compare, interleaved, median of --runs")
    t.add_argument("--runs", type=int, default=3, help="runs per checkout (default 3)")
    o = sub.add_parser("opens", help="dump.json opens of a tiny compare and a night's later steps, each checkout")
    o.add_argument("--out", type=Path, required=True, help="a new dir: each checkout's results, logs and counts")
    for p, func in ((n, numerics), (t, timing), (o, opens)):
        p.add_argument("--before", type=_checkout, required=True, help="the harness checkout before the change")
        p.add_argument("--after", type=_checkout, required=True, help="the harness checkout after it")
        p.set_defaults(func=func)
    args = ap.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
