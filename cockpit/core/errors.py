"""Provides the errors a user can cause: each carries one sentence saying what went wrong and what to do."""

from __future__ import annotations


class CockpitError(Exception):
    """An error the user can act on. `str(error)` is one line, shown as is (never a traceback)."""


class TargetError(CockpitError):
    """A TARGET argument that cannot be understood."""


class LocalClusterError(CockpitError):
    """The local Ray cluster could not be started, found or stopped."""


class JobNotFound(CockpitError):
    """No job, or more than one, answers to the id the user gave."""
