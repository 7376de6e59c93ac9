"""pytest plugin: each scenario file becomes one test item per check (``pytest scenarios/ -k NAME``).

A scenario's trainings run in the setup of its first item (errors there are infrastructure ERRORs, not
check FAILUREs), its checks once in its first item's call, and its other items read their verdicts; under pytest-xdist
all items of a scenario go to one worker (``--dist loadgroup``), and the file lock in ``harness.training.runs`` keeps
it to one run anyway. Each training shows a live line in the terminal reporter (``harness.training.monitor``); SIGTERM
and SIGHUP stop it like Ctrl-C and exit 128+N; containers of dead harnesses are swept as the test run starts.

This module is what pytest registers (pyproject: pytest11), shaped as pytest's own junitxml plugin: the options, and
one ``HarnessPlugin`` (``plugin``) made at configure, whose methods are the other hooks. The rest is cut by job:
``options``, ``items`` (the scenario file and its items), ``hygiene`` (no training outlives the test run),
``reporting`` (node ids, the time breakdown).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pytest_plugin.options import pytest_addoption
from harness.pytest_plugin.plugin import KEY, HarnessPlugin

__all__ = ["pytest_addoption"]  # a hook: pytest registers this module (pyproject: pytest11)


def _scenario_file(parent: pytest.Collector, path: Path) -> pytest.Collector:
    from harness.pytest_plugin.items import ScenarioFile  # the checks and the gate: only where a scenario is collected

    return ScenarioFile.from_parent(parent, path=path)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[KEY] = plugin = HarnessPlugin(config, _scenario_file)
    config.pluginmanager.register(plugin, "harness-plugin")


def pytest_unconfigure(config: pytest.Config) -> None:
    if (plugin := config.stash.get(KEY, None)) is not None:
        config.pluginmanager.unregister(plugin)
        plugin.close()
        del config.stash[KEY]
