"""Numerics of base against head: the statistics of the two targets' "on" dumps, entry by entry, on msprobe's
thresholds. ``compare`` walks the trees and runs an engine, ``stats_compare`` is the harness's own (streaming; its
jobs in ``rows``, ``rules``, ``cells`` and ``table``), ``msprobe_cli`` runs msprobe's (the oracle, and ``-da`` for
the first divergence), ``report`` is what was found."""
