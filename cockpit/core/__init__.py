"""Provides the headless core of the cockpit, one package a subject (cluster, connect, jobs, logs, metrics,
actors, gpu, debug, doctor, slurm, ssh, local, config) over six shared modules (errors, snapshots, units,
text, targets, heap). `docs/where-things-go.md` says what each holds.

Nothing under `cockpit.core` imports Textual or Ray, and a package imports only those below it: the
import-linter contracts in pyproject.toml say which, and `lint-imports` checks them.
"""
