"""Merge JUnit files from xdist workers or CI shards into one: each testcase once, with its properties.

A testcase can appear more than once (a shard re-run, or pytest's separate element for a teardown error).
The merged file keeps one element per (classname, name): the worst outcome (error > failure > passed >
skipped, so a re-run never hides a failure) with the union of the properties all copies carried.
"""

from __future__ import annotations

import copy
from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite

from harness.errors import BaselineError
from harness.safeio import MB, InputError, read_text

MAX_JUNIT_BYTES = 256 * MB


def _rank(case: TestCase) -> int:
    results = case.result
    if any(isinstance(r, Error) for r in results):
        return 3
    if any(isinstance(r, Failure) for r in results):
        return 2
    if any(isinstance(r, Skipped) for r in results):
        return 0
    return 1


def properties(case: TestCase) -> list[tuple[str, str]]:
    props = case.child(Properties)
    return [(p.name, p.value) for p in props.iterchildren(Property)] if props is not None else []


def _set_properties(case: TestCase, props: list[tuple[str, str]]) -> None:
    old = case.child(Properties)
    if old is not None:
        case.remove(old)
    if not props:
        return
    node = Properties()
    for name, value in props:
        node.add_property(Property(name, value))
    case._elem.insert(0, node._elem)  # properties come first in the JUnit schema


def _suites(xml: JUnitXml | TestSuite) -> list[TestSuite]:
    return [xml] if isinstance(xml, TestSuite) else list(xml)


def merge_junit(inputs: list[Path], output: Path, suite_name: str = "harness") -> tuple[int, int]:
    """Write the merged file; returns (testcases written, duplicates folded)."""
    cases: dict[tuple[str, str], TestCase] = {}
    props: dict[tuple[str, str], list[tuple[str, str]]] = {}
    duplicates = 0
    for path in inputs:
        try:
            read_text(path, MAX_JUNIT_BYTES)  # a regular UTF-8 file of sane size, checked before the parser opens it
            parsed = JUnitXml.fromfile(str(path))
        except (InputError, ValueError, SyntaxError) as exc:  # ElementTree's ParseError is a SyntaxError
            raise BaselineError(f"{path}: not a JUnit XML file ({str(exc).splitlines()[0][:120]})") from None
        for suite in _suites(parsed):
            for case in suite:
                key = (case.classname or "", case.name or "")
                seen = props.setdefault(key, [])
                seen += [p for p in properties(case) if p not in seen]
                if key in cases:
                    duplicates += 1
                    if _rank(case) <= _rank(cases[key]):
                        continue
                cases[key] = copy.deepcopy(case)
    merged = TestSuite(suite_name)
    for key in cases:  # first-seen order: the order the tests ran in
        case = cases[key]
        _set_properties(case, props[key])
        merged.add_testcase(case)
    merged.update_statistics()
    xml = JUnitXml()
    xml.add_testsuite(merged)
    xml.update_statistics()
    output.parent.mkdir(parents=True, exist_ok=True)
    xml.write(str(output), pretty=True)
    return len(cases), duplicates
