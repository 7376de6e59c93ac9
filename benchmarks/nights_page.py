"""The page of the nights over a real history, and its screenshot in a real headless Chromium (the README's).

    .venv/bin/python benchmarks/nights_page.py HISTORY --out SITE --png docs/images/nights.png [--scenario S]

Publishes HISTORY (``history publish``) into SITE, loads the scenario's page (default: the first) as a person's browser
does (tests/browser.py: Debian's chromium over the DevTools protocol), prints what loading it requested and logged,
and keeps the top of the page as the PNG.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("history", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--png", type=Path, required=True)
    p.add_argument("--scenario")
    p.add_argument("--height", type=int, default=1500, help="pixels of the page's top kept (default 1500)")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import Browser, find

    from harness.history.store import History
    from harness.report.nights import publish

    started = time.monotonic()
    site = publish(History.read(a.history), a.out, "https://github.com/verl-project/verl")
    print(f"published {site.index}: {len(site.pages)} scenarios, {site.charts} charts in "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
    page = site.pages[a.scenario] if a.scenario else next(iter(site.pages.values()))
    binary = find()
    if binary is None:
        sys.exit("no chromium on PATH (apt-get install chromium)")
    with Browser(binary) as browser:
        started = time.monotonic()
        got = browser.load(page.as_uri())
        print(f"loaded {page.name} in {time.monotonic() - started:.2f}s: requests {got.requests}, console "
              f"{got.console}, exceptions {got.exceptions}, log {got.log}")  # fmt: skip
        a.png.parent.mkdir(parents=True, exist_ok=True)
        browser.screenshot(a.png, a.height)
    print(f"screenshot {a.png} ({a.png.stat().st_size // 1024} kB)")


if __name__ == "__main__":
    main()
