"""Provides the list of main screens: key, mode name, footer label and where its class is.

Adding a screen means writing its module under `screens/` and adding one line here; the app builds its
modes and number keys from this list. A screen's module is imported when the screen is first shown
(`MainScreen.screen`), not at start: the first screen comes up without the others' imports (the
palette, `?` and a `keys:` remapping import them all when they need their bindings: `import_all`).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.ui.screens.base import CockpitScreen


@dataclass(frozen=True)
class MainScreen:
    key: str
    mode: str
    label: str
    module: str
    """Its module under `cockpit.ui.screens`."""
    name: str
    """Its class in that module."""
    footer: bool = True
    """In the footer (at 80 columns it holds the eight screens, `?` and `q`; `?` lists the rest)."""

    @property
    def screen(self) -> type[CockpitScreen]:
        """Its class (the module imported on first use)."""
        found: type[CockpitScreen] = getattr(
            importlib.import_module(f"cockpit.ui.screens.{self.module}"), self.name
        )
        return found

    @property
    def loaded(self) -> bool:
        """Whether its module was imported."""
        return f"cockpit.ui.screens.{self.module}" in sys.modules

    def new(self) -> CockpitScreen:
        """A new instance: what Textual's `MODES` calls when the mode is first entered."""
        return self.screen()


MAIN_SCREENS: tuple[MainScreen, ...] = (
    MainScreen("0", "cockpit", "Cockpit", "cockpit", "CockpitLayoutScreen", footer=False),
    MainScreen("1", "cluster", "Cluster", "cluster", "ClusterScreen"),
    MainScreen("2", "gpus", "GPUs", "gpus", "GpuScreen"),
    MainScreen("3", "actors", "Actors", "actors", "ActorsScreen"),
    MainScreen("4", "jobs", "Jobs", "jobs", "JobsScreen"),
    MainScreen("5", "logs", "Logs", "logs", "LogsScreen"),
    MainScreen("6", "debugger", "Debug", "debugger", "DebuggerScreen"),
    MainScreen("7", "metrics", "Metrics", "metrics", "MetricsScreen"),
    MainScreen("8", "doctor", "Doctor", "doctor", "DoctorScreen"),
)
FIRST = "cluster"
"""The screen the app opens on, unless a layout was chosen (`--layout`, or `layout:` in config): then
the cockpit screen."""


def import_all() -> None:
    """Every main screen's module (and so every widget with bindings): for what lists every binding."""
    for entry in MAIN_SCREENS:
        entry.screen  # noqa: B018 - imported for its classes
