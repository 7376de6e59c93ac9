"""JUnit merging: files from xdist workers or CI shards become one, each testcase once, with its properties."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree

import pytest

from harness.cli import main
from harness.report.junit import merge_junit


def junit(cases: str) -> str:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>'
    )


def case(name: str, props: dict[str, str] | None = None, result: str = "") -> str:
    p = "".join(f'<property name="{k}" value="{v}"/>' for k, v in (props or {}).items())
    return (
        f'<testcase classname="scenarios.tiny" name="{name}" time="1.0"><properties>{p}</properties>{result}</testcase>'
    )


def parse(path: Path) -> dict[str, ElementTree.Element]:
    cases = list(ElementTree.parse(path).getroot().iter("testcase"))
    assert len(cases) == len({c.get("name") for c in cases}), "a testcase appears twice"
    return {c.get("name", ""): c for c in cases}


def props(c: ElementTree.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in c.iter("property")}


def test_shards_merge_into_one_file_each_case_once_with_properties(tmp_path):
    (tmp_path / "a.xml").write_text(junit(case("layout", {"layout.found_dirs": "12"}) + case("disk", {"d": "1"})))
    failure = '<failure message="boom">trace</failure>'
    (tmp_path / "b.xml").write_text(
        junit(case("overhead", {"overhead.profiled": "14.2"}) + case("disk", {"d": "1", "e": "2"}, failure))
    )
    written, folded = merge_junit([tmp_path / "a.xml", tmp_path / "b.xml"], tmp_path / "m.xml")
    assert (written, folded) == (3, 1)
    cases = parse(tmp_path / "m.xml")
    assert list(cases) == ["layout", "disk", "overhead"]
    assert props(cases["layout"]) == {"layout.found_dirs": "12"}
    assert props(cases["disk"]) == {"d": "1", "e": "2"}  # the union, each property once
    assert cases["disk"].find("failure") is not None  # the worse outcome of the two copies wins
    suite = ElementTree.parse(tmp_path / "m.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "1"


def test_junit_merge_cli(tmp_path, capsys):
    (tmp_path / "a.xml").write_text(junit(case("layout")))
    assert main(["junit-merge", str(tmp_path / "m.xml"), str(tmp_path / "a.xml")]) == 0
    assert "1 testcases from 1 file(s), 0 duplicates folded" in capsys.readouterr().out
    assert main(["junit-merge", str(tmp_path / "m.xml"), str(tmp_path / "missing.xml")]) == 2


@pytest.mark.integration
def test_real_xdist_run_merges_with_every_testcase_and_property(tmp_path):
    """pytest -n 2 --junitxml, twice (two 'shards' that overlap), then merged: properties survive."""
    (tmp_path / "test_props.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.parametrize("n", range(6))
            def test_figure(n, record_property):
                record_property("figure", n)
                record_property("overhead.profiled", 10 + n)
            """
        )
    )
    for shard in ("one", "two"):
        argv = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p", "no:harness"]
        argv += [f"--junitxml={tmp_path / shard}.xml", "test_props.py"]
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    merge_junit([tmp_path / "one.xml", tmp_path / "two.xml"], tmp_path / "merged.xml")
    cases = parse(tmp_path / "merged.xml")
    assert sorted(cases) == [f"test_figure[{n}]" for n in range(6)]
    for n in range(6):
        assert props(cases[f"test_figure[{n}]"]) == {"figure": str(n), "overhead.profiled": str(10 + n)}
    names = Counter(p.get("name") for c in cases.values() for p in c.iter("property"))
    assert set(names.values()) == {6}
