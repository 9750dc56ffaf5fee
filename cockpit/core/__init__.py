"""Provides the headless core of the cockpit: targets, the dashboard client, snapshots, local clusters.

Nothing under `cockpit.core` imports Textual (tests/unit/test_import_hygiene.py proves it), and only
`local_cluster` and the demo workload touch the `ray` package.
"""
