"""``history publish``, the page of the nights, opened in a real headless Chromium (Debian's package; tests/browser.py
drives it over the DevTools protocol): no console error, no request but the page's own file, a chart per (scenario,
figure) series, a point per night, a change-point marker at the step's night; and its bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from browser import Browser, find
from gate_builders import ENV, write_results
from test_history import NOISE

from harness.cli import main

pytestmark = pytest.mark.integration

# what gate_builders.write_results gives each scenario a night: overhead.wall.profiled, .unprofiled and
# .stage.actor_update, and the first profiled step (the history's figure of msprobe's set-up); disk.total_bytes,
# disk.stage.actor_update_bytes, disk.rank0_bytes, disk.rank1_bytes; and the run time off and on (its steps' times
# summed): 10 series; the per-step figures (overhead.stepN, time_*.stepN_s, disk.stepN_bytes) are the report's, not
# charted
SERIES_PER_SCENARIO = 10
NIGHTS, STEP = 12, 9
REQUIRED = os.environ.get("HARNESS_REQUIRE_CHROMIUM") == "1"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find()
    if found is None:
        if REQUIRED:
            pytest.fail("HARNESS_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)", pytrace=False)
        pytest.skip("no chromium on PATH: the page's browser tests need Debian's chromium (.ci/run installs it)")
    return found


def history(tmp_path: Path, capsys: pytest.CaptureFixture[str], scenarios: tuple[str, ...] = ("tiny_a", "tiny_b"),
            nights: int = NIGHTS) -> Path:  # fmt: skip
    """``nights`` nights of ``scenarios``, every overhead figure 1.4x slower from night ``STEP`` on."""
    h = tmp_path / "history.json"
    for i in range(1, nights + 1):
        r = tmp_path / f"night{i}"
        slow = 1.4 if i >= STEP else 1.0
        for name in scenarios:
            env = ENV | {"verl_commit": f"{i:02x}" * 20, "cpu_model": "Xeon"}
            write_results(r, name=name, env=env, dumps=False, profiled=10.0 * slow * (1 + NOISE[i]),
                          unprofiled=1.0 * (1 + NOISE[i]), stage=12.0 * slow * (1 + NOISE[i]))  # fmt: skip
        assert main(["history", "append", str(h), str(r), "--date", f"2026-11-{i:02d}", "--runner", "x",
                     "--run-url", f"https://github.com/o/r/actions/runs/{i}"]) == 0  # fmt: skip
    capsys.readouterr()
    return h


def publish(h: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["history", "publish", str(h), "--out", str(out)])
    got = capsys.readouterr()
    return code, got.out, got.err


CHARTS = """[...document.querySelectorAll('.chart')].map(c => {
  const svg = c.querySelector('svg');
  const points = [...svg.querySelectorAll('[id^=nights-] a')].map(a => {
    const r = a.getBoundingClientRect(); return {x: r.x + r.width / 2, href: a.getAttribute('xlink:href')}; });
  const changes = [...svg.querySelectorAll('[id^=change-]')].map(g => {
    const r = g.getBoundingClientRect(); return r.x + r.width / 2; });
  return {metric: c.dataset.metric, points, changes};
})"""


def test_the_page_of_twelve_nights_in_a_real_browser(tmp_path, capsys, chromium):
    h = history(tmp_path, capsys)
    site = tmp_path / "site"
    code, out, err = publish(h, site, capsys)
    assert (code, err) == (0, ""), err
    assert out == f"{site / 'index.html'}: 2 scenarios, {2 * SERIES_PER_SCENARIO} charts over {NIGHTS} nights\n"
    with Browser(chromium) as browser:
        index = browser.load((site / "index.html").as_uri())
        links = browser.evaluate("[...document.querySelectorAll('table a')].map(a => a.getAttribute('href'))")
        states = browser.evaluate("[...document.querySelectorAll('td.regressed')].map(td => td.textContent)")
        assert links == ["tiny_a.html", "tiny_b.html"] and states == ["REGRESSED", "REGRESSED"]
        loads = [index]
        charts = {}
        for page in links:
            loads.append(browser.load((site / page).as_uri()))
            charts[page] = browser.evaluate(CHARTS)
            if page == "tiny_a.html":
                browser.screenshot(site / "screenshot.png")  # kept with the site (tmp_path: pytest keeps the last 3)
    for got, page in zip(loads, ["index.html", *links], strict=True):
        assert (got.console, got.exceptions, got.log) == ([], [], []), page
        assert got.requests == [(site / page).as_uri()], got.requests  # nothing but the page itself
    assert sum(len(c) for c in charts.values()) == 2 * SERIES_PER_SCENARIO
    for page, page_charts in charts.items():
        for chart in page_charts:
            assert len(chart["points"]) == NIGHTS, (page, chart["metric"])
            xs = [p["x"] for p in chart["points"]]
            assert xs == sorted(xs) and chart["points"][0]["href"] == "https://github.com/verl-project/verl/commit/" + (
                "01" * 20
            )
        profiled = next(c for c in page_charts if c["metric"] == "overhead.wall.profiled")
        step_x = profiled["points"][STEP - 1]["x"]
        assert profiled["changes"] and all(abs(x - step_x) < 1.5 for x in profiled["changes"]), (profiled, step_x)
        unprofiled = next(c for c in page_charts if c["metric"] == "overhead.wall.unprofiled")
        assert unprofiled["changes"] == []  # no step there: no marker
    assert (site / "screenshot.png").stat().st_size > 10_000


def test_one_night_says_so_and_html_from_the_history_is_escaped(tmp_path, capsys, chromium):
    h = history(tmp_path, capsys, nights=1)
    doc = json.loads(h.read_text())
    night = doc["nights"][0]
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    night["identity"]["runner"] = night["identity"]["msprobe"] = hostile
    h.write_text(json.dumps(doc))
    site = tmp_path / "site"
    code, _, err = publish(h, site, capsys)
    assert (code, err) == (0, ""), err
    pages = sorted(p.name for p in site.glob("*.html"))
    assert pages == ["index.html", "tiny_a.html", "tiny_b.html"]
    with Browser(chromium) as browser:
        for page in pages:
            got = browser.load((site / page).as_uri())
            assert (got.console, got.exceptions, got.log) == ([], [], []) and len(got.requests) == 1, page
            assert browser.evaluate("document.querySelectorAll('script, img, [onerror]').length") == 0, page
            assert "one night" in browser.evaluate("document.body.textContent"), page
        assert hostile in browser.evaluate("document.body.textContent")  # shown as text
    # markup as a scenario's name is no scenario's name: refused as the history is read, nothing written
    night["scenarios"][hostile] = night["scenarios"].pop("tiny_a")
    h.write_text(json.dumps(doc))
    code, _, err = publish(h, tmp_path / "refused", capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "scenario names are lowercase letters" in err, err
    assert not list((tmp_path / "refused").iterdir())


def test_an_accepted_change_is_marked_with_its_reason_and_a_renamed_scenario_is_two(tmp_path, capsys, chromium):
    h = history(tmp_path, capsys, scenarios=("tiny_a",))
    night = json.loads(h.read_text())["nights"][STEP - 1]["id"]
    assert main(["history", "accept", str(h), f"tiny_a:overhead.wall.profiled@{night}", "--reason",
                 "richer <b>statistics</b>"]) == 0  # fmt: skip
    capsys.readouterr()
    assert publish(h, tmp_path / "accepted", capsys)[0] == 0
    doc = json.loads(h.read_text())
    for n in doc["nights"][6:]:  # renamed from night 7 on: the step at night 9 is in the new name's series
        n["scenarios"]["tiny_a2"] = n["scenarios"].pop("tiny_a")
    renamed = tmp_path / "renamed.json"
    renamed.write_text(json.dumps(doc))
    assert publish(renamed, tmp_path / "renamed", capsys)[0] == 0
    with Browser(chromium) as browser:
        browser.load((tmp_path / "accepted" / "tiny_a.html").as_uri())
        label = browser.evaluate("[...document.querySelectorAll('.chart')].find(c => c.dataset.metric == "
                                 "'overhead.wall.profiled').querySelector('svg').textContent")  # fmt: skip
        bold = browser.evaluate("document.querySelectorAll('b').length")
        browser.load((tmp_path / "renamed" / "index.html").as_uri())
        rows = browser.evaluate("[...document.querySelectorAll('tr')].slice(1).map(r => r.cells[1].textContent)")
        points = {}
        for name in ("tiny_a", "tiny_a2"):
            browser.load((tmp_path / "renamed" / f"{name}.html").as_uri())
            points[name] = {len(c["points"]) for c in browser.evaluate(CHARTS)}
    assert "accepted 1.4" in label and "richer <b>statistics</b>" in label and bold == 0  # text, not markup
    assert rows == ["ok", "REGRESSED"] and points == {"tiny_a": {6}, "tiny_a2": {6}}


def test_a_metric_that_disappears_is_charted_on_its_nights(tmp_path, capsys, chromium):
    h = history(tmp_path, capsys, scenarios=("tiny_a",))
    doc = json.loads(h.read_text())
    for night in doc["nights"][6:]:  # the unprofiled figure gone from night 7 on
        for run in night["scenarios"]["tiny_a"]:
            run["figures"].pop("overhead.wall.unprofiled")
            run["samples"].pop("overhead.wall.unprofiled")
    h.write_text(json.dumps(doc))
    site = tmp_path / "site"
    assert publish(h, site, capsys)[0] == 0
    with Browser(chromium) as browser:
        browser.load((site / "tiny_a.html").as_uri())
        charts = browser.evaluate(CHARTS)
        text = browser.evaluate("document.body.textContent")
    assert len(charts) == SERIES_PER_SCENARIO
    assert len(next(c for c in charts if c["metric"] == "overhead.wall.unprofiled")["points"]) == 6
    assert "overhead.wall.unprofiled" in text and "disappears" in text


def test_bad_input_is_one_line_and_nothing_is_written_outside_out(tmp_path, capsys):
    h = history(tmp_path, capsys, nights=2)
    before = sorted(p.name for p in tmp_path.iterdir())
    for out, said in ((h, "--out " + str(h) + ": is the input"), (tmp_path, "--out " + str(tmp_path) + ": holds")):
        code, _, err = publish(h, out, capsys)
        assert code == 2 and len(err.splitlines()) == 1 and said in err, err
    code, _, err = publish(tmp_path / "none.json", tmp_path / "site", capsys)
    assert code == 2 and "no such file" in err and len(err.splitlines()) == 1
    code = main(["history", "publish", str(h), "--out", str(tmp_path / "site"), "--verl-url", "javascript:x"])
    assert code == 2 and "--verl-url 'javascript:x': not an http(s) URL" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
