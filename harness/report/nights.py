"""The page of the nights (``history publish``): a static site over a history, one page a scenario, one chart a
figure over the nights in verl's commit order, each night's samples shown beside its value, change points marked.

Static on purpose: it loads from ``file://`` and from GitHub Pages alike and makes no request (every chart an SVG
inlined by matplotlib, its text SVG text in the page's fonts; no script, font or stylesheet fetched). All from the
history (scenario names, commits, runners, reasons) is escaped: a history is data, and one from a pull request's run
must not write the page's markup. Each scenario's page is ``<scenario>.html``, its name one the scenario loader
accepts (never ``index``: the index's), checked again here; the site is written only into a directory that is new,
empty or the page's own (its ``MARKER`` file, written first): a site's ``index.html`` of anyone else is never
overwritten. Charted: the figures a person reads a night by (overhead per stage and profiled or
unprofiled step, wall and CPU; disk in total, per stage and per rank; entry counts; the run time off and on); a
step's own figures are the report's. The verdicts are ``history check``'s (``harness.history.verdict``): nothing is
judged here.
"""

from __future__ import annotations

import html
import io
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt

from harness import outcomes
from harness.artifacts.figures import parse
from harness.history.series import Key
from harness.history.store import History, HistoryError, Night
from harness.history.verdict import Finding, check_history
from harness.outside import shown
from harness.safeio import write_atomic
from harness.scenario.loader import name_problem

# the kinds charted (harness.artifacts.figures), in the order a page shows them: overhead first, the headline
CHARTED = ["overhead", "overhead.first", "overhead.stage", "overhead.cpu", "overhead.cpu.stage", "run_time",
           "disk.total", "disk.stage", "disk.rank", "structure", "contents.entries"]  # fmt: skip
RUN_TIME = ("time", "time.outside_steps")  # summed per mode: the run's training time, off and on (kind run_time)
UNITS = {"ratio": "on/off (x)", "bytes": "MB", "count": "entries", "seconds": "s"}
# a scenario's state on the index, worst first: the word history check gives its findings
STATES: list[tuple[str, str]] = [
    ("regressed", outcomes.HISTORY_WORDS["regressed"]),
    ("environment", outcomes.HISTORY_WORDS["environment"]),
    ("suspected", outcomes.HISTORY_WORDS["suspected"]),
    ("accepted", "ok (a change accepted)"),
    ("ok", "ok"),
]
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.regressed,.environment{color:#b00020;font-weight:bold}.suspected{color:#a15c00;font-weight:bold}
.chart{margin:1.2em 0}.chart svg{max-width:100%;height:auto}code{font-size:90%}li{margin:.3em 0}"""
MARKER = ".nights-page"  # in every directory the page is written to: one holding it is the page's own


@dataclass
class Chart:
    scenario: str
    metric: str
    kind: str
    unit: str
    values: dict[int, list[float]] = field(default_factory=dict)  # night index: the night's runs' values or samples

    def night_value(self, i: int) -> float:
        """A night's point: the geometric mean of a ratio's samples (as the detector reads it), else the mean."""
        xs = self.values[i]
        if self.unit == "ratio":
            return math.exp(statistics.fmean(math.log(x) for x in xs))
        return statistics.fmean(xs)


@dataclass
class Site:
    index: Path
    pages: dict[str, Path]
    charts: int


def _scale(unit: str, v: float) -> float:
    return v / 1e6 if unit == "bytes" else v


def charts_of(history: History) -> list[Chart]:
    """Every charted figure of every scenario, its values night by night (crashed and failed runs are no point)."""
    charts: dict[tuple[str, str], Chart] = {}
    for i, night in enumerate(history.nights):
        for scenario, runs in night.scenarios.items():
            for run in runs:
                if run.status != "ok":
                    continue
                totals: dict[str, float] = {}
                for metric, value in run.figures.items():
                    f = parse(metric)
                    if f.kind in RUN_TIME:
                        mode = metric.split(".", 1)[0]
                        totals[f"{mode}.run_s"] = totals.get(f"{mode}.run_s", 0.0) + value
                        continue
                    if f.kind not in CHARTED:
                        continue
                    chart = charts.setdefault((scenario, metric), Chart(scenario, metric, f.kind, f.unit))
                    samples = list(run.samples.get(metric, {}).values()) or [value]
                    chart.values.setdefault(i, []).extend(samples)
                for metric, value in totals.items():
                    chart = charts.setdefault((scenario, metric), Chart(scenario, metric, "run_time", "seconds"))
                    chart.values.setdefault(i, []).append(value)
    return sorted(charts.values(), key=lambda c: (c.scenario, CHARTED.index(c.kind), c.metric))


def _state(findings: Iterable[Finding]) -> str:
    seen = {"accepted" if f.accepted is not None else f.status for f in findings}
    return next((s for s, _ in STATES if s in seen), "ok")


def _commit_url(verl_url: str, night: Night) -> str | None:
    sha = night.identity.verl_commit
    return f"{verl_url}/commit/{sha}" if sha else None


def _label(night: Night) -> str:
    ident = night.identity
    return ident.verl_commit[:9] if ident.verl_commit else ident.verl


def _svg(chart: Chart, k: int, history: History, findings: list[Finding], verl_url: str) -> str:
    """One chart as inline SVG: each night's samples (small grey dots) and its value (a marker linked to its verl
    commit), every change point of the series a vertical line at its first night after, labelled with its size and
    interval, and the reason where it was accepted."""
    with plt.rc_context({"svg.fonttype": "none"}):  # text as text: the page's own fonts, searchable, selectable
        return _draw(chart, k, history, findings, verl_url)


def _draw(chart: Chart, k: int, history: History, findings: list[Finding], verl_url: str) -> str:
    nights = sorted(chart.values)
    fig, ax = plt.subplots(figsize=(10.5, 3.0))
    for i in nights:
        xs = chart.values[i]
        ax.scatter([i] * len(xs), [_scale(chart.unit, x) for x in xs], s=7, color="#9a9a9a", zorder=2, linewidths=0)
    points = ax.scatter(nights, [_scale(chart.unit, chart.night_value(i)) for i in nights], s=34, color="tab:blue",
                        zorder=3, edgecolors="white", linewidths=0.6)  # fmt: skip
    points.set_urls([_commit_url(verl_url, history.nights[i]) for i in nights])
    points.set_gid(f"nights-{k}")
    ax.plot(nights, [_scale(chart.unit, chart.night_value(i)) for i in nights], color="tab:blue", lw=0.8, zorder=1)
    for j, f in enumerate(findings):
        at = f.change.after.index
        word = "accepted" if f.accepted is not None else f.status
        color = {"regressed": "#b00020", "environment": "#b00020", "suspected": "#a15c00"}.get(word, "#2e7d32")
        line = ax.axvline(at, color=color, ls="--", lw=1.2, zorder=4)
        line.set_gid(f"change-{k}-{j}")
        text = f"{f.line.split(':', 1)[0]} {f.change.size_text()}"  # REGRESSED, SUSPECTED, improved, accepted, ...
        if f.accepted is not None:
            text += f": {f.accepted.reason[:60]}"
        ax.annotate(text, (at, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -12), textcoords="offset points",
                    fontsize=8, color=color, parse_math=False)  # fmt: skip
    ax.set_xlim(-0.6, len(history.nights) - 0.4)
    ticks = list(range(len(history.nights)))
    step = max(1, math.ceil(len(ticks) / 16))
    ax.set_xticks(ticks[::step])
    ax.set_xticklabels([_label(history.nights[i]) for i in ticks[::step]], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(UNITS.get(chart.unit, chart.unit), fontsize=8)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax.set_title(chart.metric, fontsize=10, loc="left", parse_math=False)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _writable(out: Path, scenarios: list[str]) -> None:
    """HistoryError, one line, before anything is written: a scenario whose page would not be a file of its own (a
    history built in code, not read: a read one is checked as it is read), or ``out`` holding files of anyone else
    (a directory that is not empty and has no ``MARKER``)."""
    if bad := next((s for s in scenarios if name_problem(s)), None):
        raise HistoryError(f"scenario {shown(repr(bad))}: {name_problem(bad)}: its page would not be a file of its own")
    marker = out / MARKER
    if any(out.iterdir()) and (marker.is_symlink() or not marker.is_file()):
        raise HistoryError(
            f"{out}: holds files the page of the nights did not write (no {MARKER}): publish into a new or empty "
            "directory, or the page's own"
        )


def _page(title: str, body: list[str]) -> str:
    head = f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
    policy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"  # nothing fetched, nothing run
    head += f'<meta http-equiv="Content-Security-Policy" content="{policy}"><style>{STYLE}</style></head><body>'
    return head + "\n".join(body) + "</body></html>\n"


def _link(url: str | None, text: str) -> str:
    return f'<a href="{html.escape(url)}">{html.escape(text)}</a>' if url else html.escape(text)


def _duet_text(night: Night, scenario: str) -> str:
    """The night's duet for one scenario: its verdict, the base's commit and runs a side, head/base per figure."""
    d = night.duet
    if d is None:
        return "-"
    if d.mode == "history":
        return f"{d.verdict}: {d.lines[-1] if d.lines else ''}"[:300]
    base = f"against {(d.base_commit or '?')[:12]}" if d.mode == "duet" else "noise record (verl did not move)"
    runs = f"{len(d.base_runs.get(scenario, []))} base runs, {len(night.scenarios.get(scenario, []))} of tonight's"
    ratios = ", ".join(f"{m.removeprefix('overhead.')} {v:.3f}x" for m, v in sorted(d.ratios.get(scenario, {}).items()))
    return f"{d.verdict} {base}, {runs}; head/base {ratios or '-'}"


def _nights_table(history: History, scenario: str, verl_url: str) -> list[str]:
    rows = ["<table><tr><th>#</th><th>date</th><th>verl</th><th>msprobe</th><th>torch</th><th>processor</th>"
            "<th>runner</th><th>run</th><th>this scenario</th><th>side by side (the duet)</th></tr>"]  # fmt: skip
    for i, n in enumerate(history.nights):
        ident = n.identity
        runs = n.scenarios.get(scenario, [])
        said = "; ".join(f"{r.status}" + (f": {r.why[0][:120]}" if r.why else "") for r in runs) or "not run"
        linked = [_link(_commit_url(verl_url, n), ident.commit_text()), _link(n.run, "run" if n.run else "-")]
        plain = [str(i + 1), ident.date, ident.msprobe or "-", ident.torch or "-", ident.processor, ident.runner, said]
        cells = [*map(html.escape, plain[:2]), linked[0], *map(html.escape, plain[2:6]), linked[1], html.escape(said),
                 html.escape(_duet_text(n, scenario))]  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return [*rows, "</table>"]


def publish(history: History, out: Path, verl_url: str) -> Site:
    """The site in ``out``: ``index.html`` and one page a scenario. ``verl_url``: verl's repository on the web, its
    commits linked as ``<verl_url>/commit/<sha>``."""
    verdict = check_history(history)
    by_series: dict[tuple[str, str], list[Finding]] = {}
    for f in verdict.findings:
        key: Key = f.change.series.key
        by_series.setdefault((key.scenario, key.metric), []).append(f)
    charts = charts_of(history)
    scenarios = sorted({c.scenario for c in charts} | {s for n in history.nights for s in n.scenarios})
    out.mkdir(parents=True, exist_ok=True)
    _writable(out, scenarios)
    write_atomic(out / MARKER, "the page of the nights (python -m harness history publish): it rewrites this "
                 "directory, and no directory that is not empty without this file\n")  # fmt: skip
    pages: dict[str, Path] = {}
    index_rows: list[str] = []
    one = ["<p><b>one night</b>: nothing to compare yet; the next nights draw the series.</p>"]
    notes = [f"<p>{html.escape(line)}</p>" for line in verdict.notes + verdict.reading.notes]
    for scenario in scenarios:
        mine = [c for c in charts if c.scenario == scenario]
        found = [f for (s, _), fs in by_series.items() if s == scenario for f in fs]
        state = _state(found)
        body = [f"<p><a href=\"index.html\">all scenarios</a></p><h1>{html.escape(scenario)}</h1>",
                f'<p>state: <span class="{state}">{html.escape(dict(STATES)[state])}</span></p>']  # fmt: skip
        body += one if len(history.nights) == 1 else []
        if found:
            body += ["<h2>change points</h2><ul>", *(f"<li>{html.escape(f.line)}</li>" for f in found), "</ul>"]
        if said := [n for n in verdict.reading.notes if n.startswith(f"{scenario} ")]:  # a figure (dis)appearing
            body += ["<h2>notes</h2><ul>", *(f"<li>{html.escape(n)}</li>" for n in said), "</ul>"]
        body.append("<h2>figures over the nights (verl's commit order)</h2>")
        body.append("<p>grey: each night's samples (steps and ranks, or runs); blue: the night's value, linked to its "
                    "verl commit; dashed: a change point at its first night after.</p>")  # fmt: skip
        for k, chart in enumerate(mine):
            svg = _svg(chart, k, history, by_series.get((scenario, chart.metric), []), verl_url)
            body.append(f'<div class="chart" data-metric="{html.escape(chart.metric)}">{svg}</div>')
        body += ["<h2>the nights</h2>", *_nights_table(history, scenario, verl_url)]
        path = out / f"{scenario}.html"
        write_atomic(path, _page(f"{scenario}: the nights", body))
        pages[scenario] = path
        newest = max((i for c in mine for i in c.values), default=None)
        latest = "no night ran it" if newest is None else history.nights[newest].identity.date
        index_rows.append(f'<tr><td><a href="{html.escape(path.name)}">{html.escape(scenario)}</a></td>'
                          f'<td class="{state}">{html.escape(dict(STATES)[state])}</td><td>{html.escape(latest)}</td>'
                          f"<td>{len(mine)}</td></tr>")  # fmt: skip
    first, last = (history.nights[0], history.nights[-1]) if history.nights else (None, None)
    span = (f"{len(history.nights)} nights, {first.identity.date} ({first.identity.commit_text()}) to "
            f"{last.identity.date} ({last.identity.commit_text()})") if first and last else "no nights"  # fmt: skip
    made = datetime.now(timezone.utc).isoformat(timespec="seconds")
    top = f"<p>{html.escape(span)}; history check: <b>{html.escape(verdict.word)}</b>; made {html.escape(made)}</p>"
    table = "<table><tr><th>scenario</th><th>state</th><th>latest night</th><th>charts</th></tr>"
    body = ["<h1>precision_debugger: the nights</h1>", top, *notes, *(one if len(history.nights) == 1 else []),
            table, *index_rows, "</table>"]  # fmt: skip
    index = out / "index.html"
    write_atomic(index, _page("precision_debugger: the nights", body))
    return Site(index, pages, len(charts))
