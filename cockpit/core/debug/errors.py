"""Provides the debugger's errors: a debug request that failed, a session that is over or held by
another client, a pdb console gone, an attach that could not happen.

Permanent unless waiting may help (`cockpit.core.errors.is_permanent`): a worker whose debug session
another client holds, or whose adapter did not answer yet, is worth another attach.
"""

from __future__ import annotations

from cockpit.core.errors import CockpitError


class DapError(CockpitError):
    """A debug request failed; `str(error)` is one line for the user."""


class DapClosed(DapError):
    """The debug session is over: the adapter or the worker went away, or the cockpit closed it."""


class DapBusy(DapError):
    """Another debugger client already holds this worker's debug session (it may let go)."""

    permanent = False


class PdbError(CockpitError):
    """The pdb console could not be reached or went away."""


class AttachError(CockpitError):
    """The worker could not be attached to (unreachable, busy, gone)."""

    def __init__(self, message: str, busy: bool = False) -> None:
        super().__init__(message, permanent=not busy)
        self.busy = busy
        """Another debugger client holds the worker, or its adapter did not answer yet: worth a retry."""
