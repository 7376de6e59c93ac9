"""Which stages a verl annotates for its profilers, and what its precision_debugger does with each: read from the
source (``ast``), never imported.

verl names a stage by the ``role`` of a ``DistProfiler.annotate`` decorator (``verl/workers/engine_workers.py``:
``actor_update``, ``ref_compute_log_prob``, ...); its precision_debugger (``verl/utils/profiler/
precision_debugger_profile.py``) knows the stages of its ``_STAGE_TO_ROLE`` table, binds each to a model through
``_MODEL_ATTRS_BY_ROLE``, ignores those of ``_SKIP_STAGES`` and warns on every other one (``ValueError`` under
``strict: true``). A pull request that renames an annotation silently stops that stage dumping; one that drops a
stage from the table does the same, everywhere. Reading the source, not importing it, says so for a verl that
cannot be installed or imported, and whether or not a training ever reaches the stage: base against head
(``harness compare``) lists every such change first (``diff``). What is read from the source (a role, a table's
names, a path) is kept as one printable line (``harness.outside.shown``): a pull request's role literal
``"x\\n::error::..."`` would otherwise print a workflow command of its own in the census and the compare.
"""

from __future__ import annotations

import ast
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.errors import TargetError
from harness.outside import shown
from harness.targets.environment import TargetEnv, ensure_env
from harness.targets.spec import Package, Target, git, repository, worktree_files

PROFILER_PACKAGE = "verl/utils/profiler/"
PROFILER_MODULE = f"{PROFILER_PACKAGE}precision_debugger_profile.py"
PROFILER_CONFIG = "verl/trainer/config/profiler/"  # the hydra group of global_profiler (its tool configs)
TABLES = {"_STAGE_TO_ROLE": "stage_to_role", "_MODEL_ATTRS_BY_ROLE": "model_attrs", "_SKIP_STAGES": "skip"}
MARK = b"DistProfiler"  # a file that annotates names the class (an import, a decorator)
MAX_FILE = 8 * 1024 * 1024  # a source file larger than this is no source of verl's (read as unreadable)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Annotation(_Model):
    """One ``DistProfiler.annotate(role=...)``: where, on what, and for which role (None: not a literal)."""

    path: str
    line: int
    function: str  # the qualified name of what it decorates (or encloses the call)
    role: str | None
    expression: str = ""  # the role's source when it is not a literal
    scheduled: bool = False  # ``scheduled=True`` (verl #7408): annotated inside the step instead of advancing it

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class Tables(_Model):
    """precision_debugger's own tables, as literals of its module."""

    stage_to_role: dict[str, str]
    model_attrs: dict[str, list[str]] = {}
    skip: list[str] = []


class Census(_Model):
    """A verl's annotated roles and what its precision_debugger does with each. ``problem``: why the tables could
    not be read (no profiler module, one that does not parse): every role's treatment is then unknown, and the run
    goes on where it can. ``unreadable``: files that name ``DistProfiler`` but do not parse."""

    source: str
    annotations: list[Annotation] = []
    tables: Tables | None = None
    problem: str | None = None
    unreadable: list[str] = []

    def roles(self) -> dict[str, list[Annotation]]:
        out: dict[str, list[Annotation]] = {}
        for a in self.annotations:
            if a.role is not None:
                out.setdefault(a.role, []).append(a)
        return out

    def treatment(self, role: str) -> str:
        """What this verl's precision_debugger does when a stage of ``role`` runs, in words."""
        t = self.tables
        if t is None:
            return "unknown (no precision_debugger tables)"
        if role in t.skip:
            return "ignored (_SKIP_STAGES: never dumped, no warning)"
        if role not in t.stage_to_role:
            return "UNKNOWN to precision_debugger: never dumped, a warning each call, ValueError under strict: true"
        model = t.stage_to_role[role]
        if t.model_attrs.get(model):
            return f"dumped: binds the {model} model ({', '.join(t.model_attrs[model][:2])}, ...)"
        return f"dumped: known ({model}), no model attributes: binds the worker's own module"

    def lines(self) -> list[str]:
        """The census for people: one line per annotation, then what precision_debugger knows that nothing
        annotates; a problem in one line."""
        roles = self.roles()
        t = self.tables
        head = f"stages of {self.source} (read by ast, not imported): {len(self.annotations)} DistProfiler.annotate"
        if t is not None:
            head += (
                f"; precision_debugger knows {len(t.stage_to_role)} stages ({', '.join(t.stage_to_role)}), "
                f"ignores {', '.join(t.skip) or 'none'}"
            )
        out = [head]
        if self.problem:
            out.append(f"  census: {self.problem}")
        width = max((len(a.where) for a in self.annotations), default=0)
        for a in self.annotations:
            role = a.role if a.role is not None else f"<{a.expression}>"
            flag = " (scheduled)" if a.scheduled else ""
            what = self.treatment(a.role) if a.role is not None else "role not a literal: decided at run time"
            out.append(f"  {a.where:<{width}}  {role}{flag} on {a.function}: {what}")
        if t is not None:
            idle = [s for s in t.stage_to_role if s not in roles]
            if idle:
                out.append(f"  known, annotated nowhere (never dumped): {', '.join(idle)}")
        out += [f"  unreadable: {u}" for u in self.unreadable]
        return out


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def read_tables(text: str | None) -> tuple[Tables | None, str | None]:
    """precision_debugger's tables from its module's text, or why not (one line)."""
    if text is None:
        return None, f"{PROFILER_MODULE}: not in this verl (no precision_debugger: every stage unknown to it)"
    try:
        tree = ast.parse(text, filename=PROFILER_MODULE)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None)
        return (
            None,
            f"{PROFILER_MODULE}:{line or '?'}: does not parse ({type(exc).__name__}: {getattr(exc, 'msg', exc)})",
        )
    found: dict[str, object] = {}
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        for target in targets:
            if isinstance(target, ast.Name) and target.id in TABLES and value is not None:
                found[TABLES[target.id]] = _literal(value)
    stages = found.get("stage_to_role")
    if not isinstance(stages, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in stages.items()):
        return None, f"{PROFILER_MODULE}: no literal _STAGE_TO_ROLE dict at module level (its stages cannot be read)"
    attrs = found.get("model_attrs")
    skip = found.get("skip")
    return (
        Tables(
            stage_to_role={shown(k): shown(v) for k, v in stages.items()},
            model_attrs={shown(k): [shown(a) for a in v] for k, v in attrs.items() if isinstance(v, list | tuple)}
            if isinstance(attrs, dict)
            else {},
            skip=sorted(shown(s) for s in skip) if isinstance(skip, set | frozenset | list | tuple) else [],
        ),
        None,
    )


class _Annotations(ast.NodeVisitor):
    """Every ``<DistProfiler alias>.annotate(...)`` call of one file, with the function it decorates."""

    def __init__(self, path: str, aliases: set[str]) -> None:
        self.path, self.aliases = path, aliases
        self.scope: list[str] = []
        self.found: list[Annotation] = []

    def _is_annotate(self, node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "annotate"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in self.aliases
        )

    def _record(self, call: ast.Call, function: str) -> None:
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        role = kw.get("role")
        literal = role.value if isinstance(role, ast.Constant) and isinstance(role.value, str) else None
        scheduled = kw.get("scheduled")
        self.found.append(
            Annotation(
                path=shown(self.path),
                line=call.lineno,
                function=shown(function or "<module>"),
                role=None if literal is None else shown(literal),
                expression="" if literal is not None or role is None else shown(ast.unparse(role)),
                scheduled=isinstance(scheduled, ast.Constant) and scheduled.value is True,
            )
        )

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        name = ".".join([*self.scope, node.name])
        for deco in node.decorator_list:
            if self._is_annotate(deco):
                self._record(deco, name)  # type: ignore[arg-type]
            else:
                self.visit(deco)
        self.scope.append(node.name)
        for child in node.body:
            self.visit(child)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Call(self, node: ast.Call) -> None:
        if self._is_annotate(node):
            self._record(node, ".".join(self.scope))
        self.generic_visit(node)


def _aliases(tree: ast.Module) -> set[str]:
    """The names ``DistProfiler`` goes by in a module (``from verl.utils.profiler import DistProfiler as P``)."""
    names = {"DistProfiler"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.name == "DistProfiler" and a.asname}
    return names


def annotations_of(path: str, text: str) -> list[Annotation]:
    """One file's annotations; SyntaxError (and the like) propagate: the caller names the file."""
    tree = ast.parse(text, filename=path)
    visitor = _Annotations(path, _aliases(tree))
    visitor.visit(tree)
    return visitor.found


def census_of_files(source: str, files: Iterable[tuple[str, bytes]], profiler: bytes | None) -> Census:
    """The census of ``files`` (path inside verl's tree, content) whose text names DistProfiler, and of the
    profiler module's text (None: the tree has none)."""
    annotations: list[Annotation] = []
    unreadable: list[str] = []
    for path, data in sorted(files):
        if MARK not in data:
            continue
        try:
            annotations += annotations_of(path, data.decode("utf-8", errors="replace"))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            unreadable.append(
                f"{shown(path)}:{getattr(exc, 'lineno', None) or '?'}: does not parse ({type(exc).__name__})"
            )
    tables, problem = read_tables(None if profiler is None else profiler.decode("utf-8", errors="replace"))
    return Census(source=source, annotations=annotations, tables=tables, problem=problem, unreadable=unreadable)


def _python_files(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if n.startswith("verl/") and n.endswith(".py"))


def _dir_files(root: Path, names: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for name in names:
        path = root / name
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE:
                continue  # a link is never followed (it may leave the tree); the install copies the real files
            out.append((name, path.read_bytes()))
        except OSError:
            continue
    return out


def _git_files(repo: Path, commit: str) -> list[tuple[str, bytes]]:
    """The files of ``commit`` that name DistProfiler (git grep, no checkout) plus the profiler module."""
    try:
        listed = str(git("grep", "-l", "-z", "--fixed-strings", MARK.decode(), commit, "--", "verl", cwd=repo))
    except TargetError:  # exit 1: no file names it
        listed = ""
    names = {n.split(":", 1)[1] for n in listed.split("\0") if ":" in n}
    names.add(PROFILER_MODULE)
    out = []
    for name in _python_files(names):
        try:
            out.append((name, bytes(git("show", f"{commit}:{name}", cwd=repo, binary=True))))  # type: ignore[arg-type]
        except TargetError:
            continue  # not in this commit (the profiler module, before #5186)
    return out


def census(pkg: Package, packages_dir: str | None = None) -> Census:
    """The census of one verl under test: a checkout's working tree as it is, a repository's commit, a wheel's
    files, or, for a release or the pinned one, its installed copy (``packages_dir``, the dir holding ``verl/``)."""
    source = pkg.identity if pkg.kind != "pinned" else f"verl=={pkg.version} (pinned)"
    if pkg.kind == "checkout":
        root = Path(str(pkg.source))
        files = _dir_files(root, _python_files(worktree_files(root)))
    elif pkg.kind == "git":
        files = _git_files(repository(str(pkg.source)), str(pkg.commit))
    elif pkg.kind == "wheel":
        try:
            with zipfile.ZipFile(str(pkg.source)) as whl:
                files = [
                    (i.filename, whl.read(i))
                    for i in whl.infolist()
                    if i.filename in _python_files([i.filename]) and i.file_size <= MAX_FILE
                ]
        except (OSError, zipfile.BadZipFile) as exc:
            return Census(source=source, problem=f"{pkg.source}: not a readable wheel ({shown(exc)})")
    elif packages_dir:
        root = Path(packages_dir)
        files = _dir_files(root, [str(p.relative_to(root)) for p in (root / "verl").rglob("*.py")])
    else:
        return Census(source=source, problem="no source to read (the target's environment is not made yet)")
    profiler = next((data for name, data in files if name == PROFILER_MODULE), None)
    return census_of_files(source, files, profiler)


def diff(base: Census, head: Census) -> tuple[list[str], list[str]]:
    """(findings, notes) of head's census against base's: an annotated role added, removed or renamed, a role whose
    treatment by precision_debugger changed, and head's tables lost; a role that only moved is a note."""
    findings: list[str] = []
    notes: list[str] = []
    b, h = base.roles(), head.roles()
    by_function = {(a.path, a.function): a for a in base.annotations if a.role is not None}
    renamed: set[str] = set()
    for a in head.annotations:
        was = by_function.get((a.path, a.function))
        if a.role is None or was is None or was.role is None or was.role == a.role:
            continue
        if a.role in b or was.role in h:
            continue  # both names live on elsewhere: an added or removed role below says it
        renamed |= {a.role, was.role}
        findings.append(
            f"annotated role renamed: {was.role} -> {a.role} at {a.where} ({a.function}): on head "
            f"{head.treatment(a.role)}"
        )
    for role in sorted(set(h) - set(b) - renamed):
        where = ", ".join(f"{a.where} ({a.function})" for a in h[role])
        findings.append(f"annotated role added: {role} at {where}: on head {head.treatment(role)}")
    for role in sorted(set(b) - set(h) - renamed):
        where = ", ".join(f"{a.where} ({a.function})" for a in b[role])
        findings.append(f"annotated role removed: {role} (was at {where}): no stage of that name runs on head")
    for role in sorted(set(b) & set(h)):
        if base.tables is not None and head.tables is not None and base.treatment(role) != head.treatment(role):
            findings.append(f"role {role}: {base.treatment(role)} on base; {head.treatment(role)} on head")
        moved = {a.path for a in h[role]} ^ {a.path for a in b[role]}
        if moved:
            notes.append(f"annotated role {role} moved: base {', '.join(a.where for a in b[role])}; head "
                         f"{', '.join(a.where for a in h[role])}")  # fmt: skip
    if head.problem and not base.problem:
        findings.append(f"head: {head.problem} (base has its tables)")
    elif head.problem:
        notes.append(f"census: {head.problem} (on base too)")
    elif base.problem:
        notes.append(f"census: base: {base.problem}; head has its tables")
    findings += [f"head: {u}" for u in head.unreadable if u not in base.unreadable]
    return findings, notes


# A changed line (added or removed, in a file of verl) that names the integration: its classes, its tool name, the
# calls a trainer makes to start and stop it (benchmarks/trigger_history.py measures the trigger on verl's history).
TRIGGER_LINES = r"DistProfiler|PrecisionDebugger|precision_debugger|start_profile|stop_profile"
CALLER = ".github/workflows/precision-debugger-gate.yml"  # the caller example, once copied into verl


class Trigger(_Model):
    """When the pull-request gate runs: a change to one of ``paths`` (a prefix ending in ``/``, else a file), or a
    changed line of a file of verl matching ``lines``. Derived from a census: the profiler package and its config
    group, every file that annotates, and the caller itself; the trainers and role configs that only call or
    configure the integration trigger through their changed lines, not on every edit (they change with most pull
    requests); a document that names it does not (it changes no behaviour)."""

    paths: list[str]
    lines: str = TRIGGER_LINES

    def path_regex(self) -> str:
        """The paths as one anchored ERE (grep -E, jq's test)."""
        parts = [p.replace(".", r"\.") + ("" if p.endswith("/") else "$") for p in self.paths]
        return "^(" + "|".join(parts) + ")"

    def fires(self, changes: Mapping[str, Sequence[str]]) -> bool:
        """Whether a change runs the gate: ``changes`` maps each file it touches (a rename: both names) to its
        added and removed lines."""
        paths, lines = re.compile(self.path_regex()), re.compile(self.lines)
        return any(
            paths.match(f) or (f.startswith("verl/") and any(lines.search(line) for line in changed))
            for f, changed in changes.items()
        )


def changed_lines(patch: str) -> dict[str, list[str]]:
    """A git patch (``git show`` / ``git diff``, renames detected) as the trigger reads a change: each file it
    touches (a rename: both names) with its added and removed lines, as the files API gives the caller's job."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    header = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            header = True
        elif header and line.startswith(("--- ", "+++ ", "rename from ", "rename to ")):
            name = line.split(" ", 2)[-1] if line.startswith("rename") else line[4:]
            if name != "/dev/null":
                current = out.setdefault(name.removeprefix("a/").removeprefix("b/") if line[0] in "+-" else name, [])
        elif line.startswith("@@"):
            header = False
        elif not header and line[:1] in "+-":
            current.append(line)
    return out


def trigger_of(c: Census) -> Trigger:
    """The trigger a census implies (``target --trigger``; docs/verl-caller-example.yml's ``changes`` job)."""
    annotating = sorted({a.path for a in c.annotations if not a.path.startswith(PROFILER_PACKAGE)})
    return Trigger(paths=[PROFILER_PACKAGE, PROFILER_CONFIG, *annotating, CALLER])


def census_of(target: Target, env: TargetEnv | None = None) -> Census:
    """A target's census: from its source where it has one (no environment made), else from its installed copy."""
    if target.verl.kind in ("release", "pinned"):
        env = env or ensure_env(target)
        return census(target.verl, env.facts.get("packages_dir"))
    return census(target.verl)
