"""``harness bisect``: the first commit of verl's first-parent history whose verdict flips.

A red nightly says that something between two verl commits broke the integration; this names the commit, the
way ``git bisect run`` would, with one harness run of the scenarios per probe. The search is kept apart from
the trainings (``bisect`` takes any probe: a callable from a commit to its verdict) so that its logic is tested
on generated histories without training, and the real probe (``training_probe``) is the harness's own
``Session.evaluate`` on ``<repo>@<sha>``, environments from the target cache.

What a probe says:
- ``pass`` / ``fail``: the selected checks' verdict on verl (a crash of verl or msprobe is the crash check's FAIL);
- ``skip``: no verdict at this commit, as ``git bisect skip``: it cannot be installed, is API drift for the harness,
  or failed in the harness's own code or the environment (none of them is verl's verdict, so the search goes
  around it and says so);
- ``infra``: the runner failed (a timeout, a dead process): asked once more, then skipped.

Exact verdicts (crash, layout, contents, disk and declared known gaps) are the same every time a commit is run: one
run a probe. Overhead is a timing ratio, which one run a probe would let machine load decide: its probe
(``harness.pipeline.probes``) is a whole comparison of the commit against the good one, as ``compare``
decides it, and a probe left undecided is skipped, so the search ends on the range it could narrow to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness import outcomes
from harness.errors import HarnessError, TargetError
from harness.outside import shown
from harness.targets.spec import git

ProbeOutcome = Literal["pass", "fail", "skip", "infra"]  # a probe's verdict on one commit
Find = Literal["bad", "fix"]
NOISY_CHECKS = frozenset({"overhead"})
WHY = 1000  # a probe's reason or a check's summary is cut past this


class BisectError(HarnessError):
    """Bisect input that cannot be searched (refs not ordered, an endpoint already flipped, not a verl repo)."""

    label = "BISECT ERROR"


class EndpointUndecided(BisectError):
    """An endpoint's overhead stayed undecided within the budget: the regression is not confirmed at this budget,
    so nothing between the endpoints can be named. INCONCLUSIVE (exit 3), not an error of the input."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str  # as verl's author wrote it: shown, never printed as it is (``::error::...`` is an annotation)

    def __str__(self) -> str:
        return f"{self.sha[:12]} {shown(self.subject)}"


@dataclass(frozen=True)
class Probe:
    """One commit's verdict; ``checks``: each selected check's verdict word and summary (``layout: FAIL ...``)."""

    verdict: ProbeOutcome
    checks: dict[str, tuple[str, str]] = field(default_factory=dict)
    why: str = ""  # for skip and infra: the one line that says why there is no verdict
    undecided: bool = False  # a skip because the noise left a timing undecided (not a commit that gives no verdict)

    def line(self) -> str:
        """One line: ``why`` and the checks' summaries quote what the commit's install, training or checks said."""
        if self.verdict in ("skip", "infra"):
            return f"{'skipped' if self.verdict == 'skip' else 'infrastructure failure'}: {shown(self.why, WHY)}"
        failed = [f"{c}: {w} {shown(s, WHY)}".rstrip() for c, (w, s) in self.checks.items() if w != "pass"]
        word = outcomes.FAIL if self.verdict == "fail" else "pass"
        return f"{word} ({'; '.join(failed)})" if failed else word


ProbeFn = Callable[[Commit], Probe]


@dataclass
class Outcome:
    """Where the search ended: ``first`` is the first commit with the new verdict when ``candidates`` is just it;
    skipped commits next to it leave several candidates (the first is one of them)."""

    find: Find
    last_old: Commit
    first: Commit
    candidates: list[Commit]
    flips: list[str]
    probes: list[tuple[Commit, Probe]]
    skipped: list[tuple[Commit, str]]

    @property
    def found(self) -> bool:
        return len(self.candidates) == 1

    def lines(self) -> list[str]:
        what = "first bad commit" if self.find == "bad" else "first good commit (the fix)"
        inner = len(self.probes) - 2
        out = [f"probes: {len(self.probes)} ({inner} between the endpoints, plus the 2 endpoint checks)"]
        out += [f"skipped {c.sha[:12]}: {shown(why, WHY)}" for c, why in self.skipped]
        if not self.found:
            out.append(
                f"no single {what}: skipped commits leave {len(self.candidates)} candidates after "
                f"{self.last_old.sha[:12]}: " + ", ".join(c.sha[:12] for c in self.candidates)
            )
            return out
        out.append(f"{what}: {self.first.sha} {shown(self.first.subject)}")
        out += [f"  flips: {f}" for f in self.flips]
        out.append(f"  (last {'good' if self.find == 'bad' else 'bad'} commit: {self.last_old})")
        return out


def flips(old: Probe, new: Probe) -> list[str]:
    """The verdict lines that differ between the last old commit and the first new one."""
    out = []
    for check in sorted(set(old.checks) | set(new.checks)):
        a, b = old.checks.get(check, ("-", "")), new.checks.get(check, ("-", ""))
        if a[0] != b[0]:
            out.append(f"{check}: {a[0]} -> {b[0]}" + (f" ({b[1] or a[1]})" if b[1] or a[1] else ""))
    return out


def bisect(
    commits: Sequence[Commit], probe: ProbeFn, find: Find = "bad", say: Callable[[str], None] = print
) -> Outcome:
    """Search ``commits`` (oldest first: the old endpoint, ..., the new one) for the first whose verdict is the new
    one: ``fail`` for ``find="bad"``, ``pass`` for ``find="fix"``. Endpoints are probed first and must hold the old
    and the new verdict (else BisectError, one line); commits that give no verdict are skipped."""
    if len(commits) < 2:
        raise BisectError("the range holds no commit after the old endpoint: nothing to bisect")
    old_word, new_word = ("pass", "fail") if find == "bad" else ("fail", "pass")
    probes: list[tuple[Commit, Probe]] = []
    skipped: list[tuple[Commit, str]] = []

    def ask(c: Commit) -> Probe:
        p = probe(c)
        if p.verdict == "infra":
            say(f"{c.sha[:12]}: {p.line()}; trying it once more")
            p = probe(c)
            if p.verdict == "infra":
                p = Probe("skip", p.checks, f"infrastructure failed twice: {p.why}")
        probes.append((c, p))
        say(f"probe {len(probes)}: {c}: {p.line()}")
        return p

    names = ("--good", "--bad") if find == "bad" else ("--bad", "--good")
    results = {}
    for i, (word, name) in ((0, (old_word, names[0])), (len(commits) - 1, (new_word, names[1]))):
        results[i] = p = ask(commits[i])
        if p.verdict != word and p.undecided:
            raise EndpointUndecided(
                f"{name} {commits[i].sha[:12]} is undecided, not {word}: {p.line()}: the change is not confirmed at "
                "this budget, so no commit between the endpoints is named (more --max-repeats, or a quieter runner)"
            )
        if p.verdict != word:
            already = "bad" if p.verdict == "fail" else "good"
            state = "gives no verdict" if p.verdict == "skip" else f"is already {already}"
            raise BisectError(f"{name} {commits[i].sha[:12]} {state}, not {word}: {p.line()}")
    lo, hi, skip = 0, len(commits) - 1, set()
    while candidates := [i for i in range(lo + 1, hi) if i not in skip]:
        mid = (lo + hi) / 2
        i = min(candidates, key=lambda j: (abs(j - mid), j))
        results[i] = p = ask(commits[i])
        if p.verdict == "skip":
            skip.add(i)
            skipped.append((commits[i], p.why))
        elif p.verdict == new_word:
            hi = i
        else:
            lo = i
    return Outcome(
        find=find,
        last_old=commits[lo],
        first=commits[hi],
        candidates=[commits[i] for i in range(lo + 1, hi + 1)],
        flips=flips(results[lo], results[hi]),
        probes=probes,
        skipped=skipped,
    )


def first_parent(repo: str, old: str, new: str, old_name: str, new_name: str) -> list[Commit]:
    """``old``, then each commit of ``new``'s first-parent line after it, up to ``new`` (oldest first); one-line
    BisectError when the repository is no verl git repository or the refs are not in that order."""
    path = Path(repo).expanduser()
    if not path.is_dir():
        raise BisectError(f"--verl-repo {repo}: no such directory (a verl git checkout or bare repository)")
    try:
        git("rev-parse", "--git-dir", cwd=path)
    except TargetError:
        raise BisectError(f"--verl-repo {repo}: not a git repository") from None
    shas = {}
    for ref, name in ((old, old_name), (new, new_name)):
        try:
            shas[name] = str(git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", cwd=path))
        except TargetError:
            raise BisectError(f"{name} {ref}: no such commit in {repo}") from None
        try:
            git("cat-file", "-e", f"{shas[name]}:verl/__init__.py", cwd=path)
        except TargetError:
            raise BisectError(f"--verl-repo {repo}: not a verl repository ({ref} has no verl/__init__.py)") from None
    line = str(git("rev-list", "--first-parent", shas[new_name], cwd=path)).split()
    if shas[old_name] == shas[new_name]:
        raise BisectError(f"{old_name} {old} and {new_name} {new} are the same commit: nothing lies between them")
    if shas[old_name] not in line:
        raise BisectError(
            f"{old_name} {old} is not an older commit on {new_name} {new}'s first-parent history: give the older "
            f"commit as {old_name} (refs not ordered)"
        )
    wanted = list(reversed(line[: line.index(shas[old_name]) + 1]))
    subjects = str(git("log", "--first-parent", f"-n{len(wanted)}", "--format=%H %s", wanted[-1], cwd=path))
    by_sha = {sha: subject for sha, _, subject in (ln.partition(" ") for ln in subjects.splitlines())}
    return [Commit(s, by_sha.get(s, "")) for s in wanted]
