"""Provides `CockpitError`, the base of every error a user can cause (each carries one sentence saying
what went wrong and what to do), and `is_permanent`: the one answer to "is it worth asking again?".

Every retry loop asks `is_permanent` (`cockpit wait`, `cockpit logs --follow`, the TUI's feeds ...), so
they give up on the same errors and retry the same ones. Whether an error is permanent is said once, on
its class (`permanent`), or by whoever raises it where one class covers both (a Slurm command that
timed out or is missing, an HTTP 503 or 400): the subject packages' `errors` modules say it for theirs.

The GPU agent ships this module to the nodes: it imports nothing.
"""

from __future__ import annotations


class CockpitError(Exception):
    """An error the user can act on. `str(error)` is one line, shown as is (never a traceback).

    `permanent`: asking again, unchanged, cannot help (a refused token, an unknown job, a bad flag):
    the user must change something first. True unless a subclass (or the raiser) says otherwise: an
    error that waiting may cure (the dashboard not up yet, a dropped SSH link, a busy slurmctld) says
    it is transient.
    """

    permanent: bool = True

    def __init__(self, *args: object, permanent: bool | None = None) -> None:
        super().__init__(*args)
        if permanent is not None:
            self.permanent = permanent


def is_permanent(error: BaseException) -> bool:
    """Whether retrying cannot help. Anything that is not a `CockpitError` is a bug, never retried."""
    return not isinstance(error, CockpitError) or error.permanent
