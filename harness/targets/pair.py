"""The pair a pull-request gate compares: the pull request's change, and nothing merged into its base branch since.

``pull_request.base.sha`` is the base branch's tip when the job starts. A pull request branched earlier, and a
change merged into the base branch after the branch point (a regression of main, a fix of main) would be blamed on
it, or hide its own. So ``compare --merge-base`` compares head with the merge base of the two, the branch point; and
where head is GitHub's merge commit (``refs/pull/N/merge``) and base its first parent, the pull request applied to
its base as it would merge, as given. Both sides must be ``<repository>@<ref>`` of one repository (a checkout with
the history of both: ``actions/checkout`` with ``fetch-depth: 0``).
"""

from __future__ import annotations

from harness.errors import TargetError
from harness.targets.spec import Package, git, repository


def _commits(repo: object, *args: str) -> list[str]:
    return str(git(*args, cwd=repo)).split()  # type: ignore[arg-type]


def merge_base(base: Package, head: Package) -> tuple[Package, str]:
    """``base`` replaced by the branch point of ``head`` (unchanged where it already is one, or where head is a
    merge commit of it), and the line the report shows; TargetError, one line, where no pull request's change lies
    between them (no shared history, or head not a descendant of base)."""
    if base.kind != "git" or head.kind != "git" or base.source != head.source:
        raise TargetError(
            f"--merge-base needs --base and --head as <repository>@<ref> of one repository (got {base.spec!r} and "
            f"{head.spec!r}): the merge base is found in that repository's history"
        )
    repo = repository(str(head.source))
    b, h = str(base.commit), str(head.commit)
    short = f"base {base.ref} ({b[:12]})", f"head {head.ref} ({h[:12]})"
    parents = _commits(repo, "rev-list", "--parents", "-n", "1", h)[1:]
    if len(parents) > 1 and parents[0] == b:
        return base, f"{short[0]} is the first parent of {short[1]}, a merge commit: the pull request as it would merge"
    found = _commits(repo, "merge-base", "--all", b, h) if _shares_history(repo, b, h) else []
    if not found:
        raise TargetError(f"{short[1]} and {short[0]} share no history: no pull request lies between them")
    point = found[0]
    if h == b:
        return base, f"{short[0]} and {short[1]} are the same commit: the harness against itself (A/A), no change"
    if point == h:
        raise TargetError(
            f"{short[1]} is not a descendant of {short[0]} (it is an ancestor of it): "
            "nothing of a pull request lies between them (pass the base branch's commit as --base, the pull "
            "request's as --head)"
        )
    if point == b:
        return base, f"{short[0]} is where {short[1]} branched: the pull request's change alone"
    moved = len(_commits(repo, "rev-list", f"{point}..{b}"))
    line = (
        f"{short[0]} is not an ancestor of {short[1]}: the base branch moved {moved} commit(s) after the pull request "
        f"branched; compared against their merge base {point[:12]} (the branch point), so those commits are not "
        "blamed on the pull request"
    )
    return base.model_copy(update={"commit": point, "ref": point, "spec": f"{base.source}@{point}"}), line


def _shares_history(repo: object, b: str, h: str) -> bool:
    """``git merge-base`` exits 1 both for unrelated histories and for a failure: asked apart."""
    roots = [set(_commits(repo, "rev-list", "--max-parents=0", c)) for c in (b, h)]
    return bool(roots[0] & roots[1])
