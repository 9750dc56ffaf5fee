"""Provides the list of main screens: key, mode name, footer label and class.

Adding a screen means writing its module under `screens/` and adding one line here; the app builds its
modes and number keys from this list.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.ui.screens.actors import ActorsScreen
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.screens.cluster import ClusterScreen
from cockpit.ui.screens.cockpit import CockpitLayoutScreen
from cockpit.ui.screens.debugger import DebuggerScreen
from cockpit.ui.screens.doctor import DoctorScreen
from cockpit.ui.screens.gpus import GpuScreen
from cockpit.ui.screens.jobs import JobsScreen
from cockpit.ui.screens.logs import LogsScreen
from cockpit.ui.screens.metrics import MetricsScreen


@dataclass(frozen=True)
class MainScreen:
    key: str
    mode: str
    label: str
    screen: type[CockpitScreen]
    footer: bool = True
    """In the footer (at 80 columns it holds the eight screens, `?` and `q`; `?` lists the rest)."""


MAIN_SCREENS: tuple[MainScreen, ...] = (
    MainScreen("0", "cockpit", "Cockpit", CockpitLayoutScreen, footer=False),
    MainScreen("1", "cluster", "Cluster", ClusterScreen),
    MainScreen("2", "gpus", "GPUs", GpuScreen),
    MainScreen("3", "actors", "Actors", ActorsScreen),
    MainScreen("4", "jobs", "Jobs", JobsScreen),
    MainScreen("5", "logs", "Logs", LogsScreen),
    MainScreen("6", "debugger", "Debug", DebuggerScreen),
    MainScreen("7", "metrics", "Metrics", MetricsScreen),
    MainScreen("8", "doctor", "Doctor", DoctorScreen),
)
FIRST = "cluster"
"""The screen the app opens on, unless a layout was chosen (`--layout`, or `layout:` in config): then
the cockpit screen."""
