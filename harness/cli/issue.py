"""``python -m harness issue --night DIR... --history CHECK_JSON... --title TITLE --out FILE``: the morning after's
issue (harness.report.issue): its body written to FILE where the night is a verdict on verl (nothing written where it
is not), and one line saying which; ``--state FILE``: ``verdict``, ``green`` (the open issue is closed) or
``undecided`` (a night's error: left as it is)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import outcomes
from harness.report.issue import morning
from harness.safeio import output_path, write_atomic


def cmd_issue(args: argparse.Namespace) -> int:
    out = output_path(args.out, "--out", [*args.night, *args.history])  # never an input, never through a link
    found = morning([Path(n) for n in args.night], [Path(c) for c in args.history])
    if args.state:
        state = output_path(args.state, "--state", [*args.night, *args.history])
        write_atomic(state, found.state + "\n")
    if not found:
        out.unlink(missing_ok=True)
        said = f"a night ended in an error ({', '.join(found.undecided)}): the issue is left as it is" if (
            found.undecided) else "a green night: an open issue of this nightly is closed"  # fmt: skip
        print(f"issue: no verdict on verl tonight: {said}")
        return outcomes.EXIT_PASS
    write_atomic(out, found.body(args.title, args.run, args.page))
    print(f"issue: {sum(len(v) for v in found.sections.values())} finding(s) in {out}")
    return outcomes.EXIT_PASS


def declare(sub: argparse._SubParsersAction) -> None:
    """``issue``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("issue", help="the morning after: the issue of a night that is a verdict on verl")
    p.add_argument("--night", action="append", default=[], metavar="DIR", help="a night's results (outcome.json)")
    p.add_argument("--history", action="append", default=[], metavar="CHECK_JSON", help="a history check's JSON")
    p.add_argument("--title", required=True, help="the issue's title")
    p.add_argument("--run", default="", metavar="URL", help="the night's CI run")
    p.add_argument("--page", action="append", default=[], metavar="URL", help="the page of the nights")
    p.add_argument("--out", required=True, metavar="FILE", help="the issue's body (written only if there is one)")
    p.add_argument("--state", metavar="FILE", help="verdict, green (close the open issue) or undecided (an error)")
    p.set_defaults(func=cmd_issue)
