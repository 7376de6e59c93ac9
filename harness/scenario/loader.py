"""Loading scenario files: YAML -> Scenario, with one readable line per problem (file:line: field: what)."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from harness.errors import ScenarioError
from harness.safeio import MB, InputError, read_text
from harness.scenario.model import Scenario
from harness.scenario.settings import WORKLOADS

# matched whole (fullmatch: ``$`` alone also matches before a final newline); at most 100 characters, so that every
# file named after a scenario (its results dir, lock and JUnit files, with their suffixes) fits a file name
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]{0,99}$")
# the page of the nights (``history publish``: report/nights.py) writes these beside one ``<scenario>.html`` a
# scenario: a scenario of one of these names would overwrite the page's own file
PAGE_FILES = frozenset({"index"})
MAX_NODES = 100_000  # a scenario's YAML expanded (aliases followed): a few hundred nodes; anchors nested past this
MAX_SCENARIO_BYTES = MB
PLAIN_KEY = re.compile(r"[\w.-]+")  # shown as is in a problem line; any other key is quoted (a newline in a key)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a scenario's (None: it can): each file named after a scenario (its results dir, lock,
    JUnit file, its page of the nights) must be a file name of its own, never another file's."""
    if not NAME_RE.fullmatch(name):
        return "scenario names are lowercase letters, digits and '_', at most 100 characters"
    if name in PAGE_FILES:
        return f"'{name}' is the name of the page of the nights' own {name}.html (history publish)"
    return None


def _node_at(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[yaml.Node | None, bool]:
    """The deepest YAML node along ``loc``, and whether it is the node for the full path."""
    node = root
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            return node, False
        node = child
    return node, True


def _key_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    parent, _ = _node_at(root, loc[:-1])
    if isinstance(parent, yaml.MappingNode):
        for k, _v in parent.value:
            if k.value == str(loc[-1]):
                return k.start_mark.line + 1
    return parent.start_mark.line + 1 if parent is not None else None


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the last key of ``loc`` (for listing allowed fields)."""
    model: Any = Scenario
    members: list[type[BaseModel]] = []
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        tagged = [
            m
            for m in members
            if part in getattr(getattr(m.model_fields.get("kind"), "annotation", None), "__args__", ())
        ]
        if tagged:  # a discriminated union member named by its tag ("workload.verl_ppo.x")
            model, members = tagged[0], []
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None  # a dict key
        model = field.annotation
        members = [a for a in getattr(model, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        model = members[0] if members else model
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _describe(err: ErrorDetails) -> str:
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        model = _model_at(loc)
        allowed = sorted(f.alias or n for n, f in model.model_fields.items()) if model else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown field{hint} (allowed: {', '.join(allowed)})" if allowed else "unknown field"
    if err["type"] == "missing":
        return "required field is missing"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] not in ("value_error", "assertion_error") and "input" in err and not isinstance(err["input"], dict):
        got = repr(err["input"])
        msg += f" (got {got if len(got) <= 80 else got[:77] + '...'})"
    return msg


def format_errors(path: Path, root: yaml.Node | None, exc: ValidationError) -> list[tuple[int, str]]:
    """Each problem as (line, printable line)."""
    lines = []
    for err in exc.errors():
        # a tagged union adds the tag to the location ("workload.cpu_ppo.seed"): drop it for the user
        loc = tuple(
            p for i, p in enumerate(err["loc"]) if not (i > 0 and err["loc"][i - 1] == "workload" and p in WORKLOADS)
        )
        node, exact = _node_at(root, loc)
        line = _key_line(root, loc) if err["type"] == "extra_forbidden" or not exact else None
        if line is None and node is not None:
            line = node.start_mark.line + 1
        field = ".".join(p if PLAIN_KEY.fullmatch(p) else repr(p) for p in map(str, loc))
        lines.append((line or 1, f"{path}:{line or 1}: {field or '(top level)'}: {_describe(err)}"))
    return lines


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error, not a silent last-wins."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults` is meant to be overridden
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                why = "a key that is a list or a mapping (`? [a, b]`): keys are plain names"
                raise yaml.constructor.ConstructorError(None, None, why, key_node.start_mark)
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first})", key_node.start_mark
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _expanded(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many nodes ``node`` stands for with every alias followed (an alias is the anchored node itself, shared in
    the tree): a kilobyte of nested anchors stands for billions, and anything that walks the data (validation, an
    error's text) would walk them all."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a cycle counts once (PyYAML builds recursive data from it)
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    total = 1
    for child in children:
        total += _expanded(child, memo)
        if total > MAX_NODES:
            break
    memo[id(node)] = total
    return total


def parse_yaml(path: Path, text: str) -> tuple[yaml.Node | None, Any]:
    """The YAML document as a node tree (for line numbers) and as data; ScenarioError in one line otherwise."""
    loader = None
    try:
        loader = _Loader(text)  # refuses control characters here
        root = loader.get_single_node()
        if root is not None and _expanded(root, {}) > MAX_NODES:
            raise ScenarioError([f"{path}:1: YAML expands to more than {MAX_NODES} nodes through its aliases (nested "
                                 "anchors): write the values out"])  # fmt: skip
        return root, loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = (getattr(exc, "problem", None) or str(exc).splitlines()[0]).replace("\n", "\\n")
        raise ScenarioError([f"{where}: YAML syntax error: {problem}"]) from None
    except RecursionError:
        raise ScenarioError([f"{path}:1: YAML nested too deeply: flatten the document"]) from None
    except ValueError as exc:  # a scalar PyYAML resolves but cannot build (a timestamp like 2024-13-45)
        raise ScenarioError([f"{path}: YAML value error: {exc}"]) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_scenario(path: str | Path, executor: str | None = None) -> Scenario:
    """Parse and validate one scenario file; raise ScenarioError with every problem found. Only a regular UTF-8
    file of at most 1 MB is read (a FIFO or a device named .yaml is refused before it is opened). ``executor``
    (``--executor``): the file is checked, and returned, as if its ``executor.kind`` said that one, which is how it
    will run (a workload refuses an executor it cannot run under before anything starts)."""
    path = Path(path)
    if not str(path).isprintable():  # found in a dir given: every line naming it would break (or forge a line)
        raise ScenarioError([f"{str(path)!r}: a path with a line break or another control character (rename it)"])
    try:
        text = read_text(path, MAX_SCENARIO_BYTES)
    except InputError as exc:
        raise ScenarioError([f"{path}: {exc}"]) from None
    root, data = parse_yaml(path, text)
    problems = []
    if why := name_problem(path.stem):
        problems.append(f"{path}:1: file name: {why} (rename the file)")
    if not isinstance(data, dict):
        raise ScenarioError([*problems, f"{path}:1: (top level): a scenario is a mapping of fields"])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems += [line for _, line in sorted(format_errors(path, root, exc), key=lambda p: p[0])]
    if problems:
        raise ScenarioError(problems)
    if executor and executor != scenario.executor.kind:
        block = data.get("executor")
        as_run = {**(block if isinstance(block, dict) else {}), "kind": executor}
        scenario._name = path.stem
        try:
            scenario = Scenario.model_validate({**data, "executor": as_run})  # as it will run
        except ValidationError as exc:
            problems = [f"{path}: --executor {executor}: {_describe(err)}" for err in exc.errors()]
            raise ExecutorRefused(problems, scenario) from None
    scenario._name = path.stem
    scenario._digest = hashlib.sha256(text.encode()).hexdigest()
    return scenario


class ExecutorRefused(ScenarioError):
    """A valid scenario that cannot run under the ``--executor`` given (its workload refuses it): the CLI refuses
    the input, pytest skips the scenario with this reason (``-k`` may deselect it anyway: never an error for the
    others)."""

    def __init__(self, problems: list[str], scenario: Scenario) -> None:
        super().__init__(problems)
        self.scenario = scenario


def scenario_files(paths: Iterable[str | Path]) -> list[Path]:
    """Scenario files named directly or found (``*.yaml``) in the given directories; ScenarioError when none is."""
    paths = list(paths)
    found: list[Path] = []
    for p in map(Path, paths):
        found += sorted(p.glob("*.yaml")) if p.is_dir() else [p]
    if not found:
        raise ScenarioError([f"no scenario files found in {' '.join(map(str, paths))}"])
    return found


class ScenarioList:
    """The scenarios of one command or one pytest session, each file once. A scenario's name (its file's stem) names
    its results dir, so a second file of one name is a problem: its results would replace the first's."""

    def __init__(self, executor: str | None = None) -> None:
        self.executor = executor  # ``--executor``: every file is checked as that executor runs it
        self.files: dict[str, Path] = {}

    def load(self, path: Path) -> Scenario | None:
        """``path``'s scenario, or None when the list holds that file already (named twice, it runs once).
        ScenarioError: the file is invalid, or another file of the list has its name."""
        first = self.files.setdefault(path.stem, path)
        if first is not path:
            if first.resolve() == path.resolve():
                return None
            raise ScenarioError(
                [f"{path}: scenario name {path.stem!r} is also {first}'s: one results dir each (rename one)"]
            )
        return load_scenario(path, self.executor)


def load_scenarios(paths: Iterable[str | Path], executor: str | None = None) -> tuple[list[Scenario], list[str]]:
    """Every scenario file named or found in ``paths``, through one ScenarioList, and every problem, one line each."""
    try:
        files = scenario_files(paths)
    except ScenarioError as exc:
        return [], exc.problems
    scenarios, problems, loaded = [], [], ScenarioList(executor)
    for path in files:
        try:
            if (scenario := loaded.load(path)) is not None:
                scenarios.append(scenario)
        except ScenarioError as exc:
            problems += exc.problems
    return scenarios, problems
