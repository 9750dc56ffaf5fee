"""Provides ray-cockpit: a terminal cockpit for Ray clusters running multi-node RL training.

`cockpit.__version__` is the installed distribution's version (`importlib.metadata`), so there is one
source of truth, `version` in pyproject.toml; `--version`, the help screen's header and the dashboard
client's `User-Agent` all show it. It is read on first use, not at import: every `import cockpit.x` runs
this file, and the command line's start-up stays light.
"""

from __future__ import annotations

import functools

DISTRIBUTION = "ray-cockpit"
"""The name the cockpit is installed under (`pipx install ray-cockpit`)."""


@functools.cache
def version() -> str:
    """The installed version; `0+unknown` when the code runs from a tree that was never installed."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
