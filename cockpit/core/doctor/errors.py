"""Provides the run doctor's errors: nothing to take stacks of, and a dump that cannot be read."""

from __future__ import annotations

from cockpit.core.errors import CockpitError


class SelectionError(CockpitError):
    """Nothing to take stacks of (an unknown job, actor or node); `str()` is one line."""


class StackParseError(CockpitError):
    """A dump that is neither py-spy's JSON nor its text; `str()` is one line."""
