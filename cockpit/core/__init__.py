"""Provides the headless core of the cockpit: targets, the dashboard client, snapshots, local clusters.

Nothing under `cockpit.core` imports Textual (tests/unit/test_import_hygiene.py proves it), and only
`local.processes` (the `ray` CLI) and the demo workload touch Ray.
"""
