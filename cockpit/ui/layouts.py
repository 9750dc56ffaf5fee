"""Provides the panes a layout may name and the layout the screens draw: `load_layout(NAME)` reads
`layouts/NAME.yaml` (`core.config.layouts`), checking each pane against the ones the UI has, and adds the
`NAME.tcss` beside it (row heights, pane widths: rows are `#row-1` ..., panes `#pane-NAME`).

No Textual here: `cockpit config show` checks the layout it names with the same call the app makes. The
widget of each pane is in `screens/cockpit.py` (`PANES`, keyed by `COCKPIT_PANES`) and `screens/cluster.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.core.config.layouts import LayoutError, layout_schema, read_layout
from cockpit.core.config.schema import json_schema
from cockpit.core.config.yaml_file import read_bytes

CLUSTER_PANES = ("join", "nodes", "jobs")
"""The panes the Cluster screen knows, in their default order."""
COCKPIT_PANES = ("join", "nodes", "gpu_heatmap", "gpu_list", "jobs", "driver_log", "paused", "metrics")
"""The panes of the cockpit screen: each the widget of its own screen, reading the same state."""
DEFAULT_COCKPIT: tuple[tuple[str, ...], ...] = (("join",), ("nodes",), ("jobs", "paused"), ("driver_log",))
"""The cockpit screen when no layout file is found (an installed wheel without `layouts/`)."""


@dataclass(frozen=True)
class Layout:
    name: str
    cluster: tuple[str, ...] = CLUSTER_PANES
    """Panes of the Cluster screen, top to bottom."""
    cockpit: tuple[tuple[str, ...], ...] = DEFAULT_COCKPIT
    """Rows of the cockpit screen, top to bottom; the panes of a row side by side."""
    css: str = ""
    """The `.tcss` beside the file ("" when none)."""
    css_path: Path | None = None

    @property
    def panes(self) -> tuple[str, ...]:
        return tuple(pane for row in self.cockpit for pane in row)


def load_layout(name: str) -> Layout:
    """The layout NAME; `default` exists even without the layouts folder (an installed wheel).

    Raises:
        LayoutError: one line, `FILE:LINE: ...`, naming the panes that exist when a pane is wrong.
    """
    found = read_layout(name, COCKPIT_PANES, CLUSTER_PANES)
    css_path = found.path.with_suffix(".tcss") if found.path is not None else None
    css = ""
    if css_path is not None and css_path.is_file():
        css = read_bytes(css_path, LayoutError).decode("utf-8", errors="replace")
    return Layout(
        name=name,
        cluster=found.cluster or CLUSTER_PANES,
        cockpit=found.cockpit or DEFAULT_COCKPIT,
        css=css,
        css_path=css_path if css else None,
    )


def load_layout_or_default(name: str) -> tuple[Layout, str | None]:
    """The layout NAME, or the default one and the line saying why NAME could not be used."""
    try:
        return load_layout(name), None
    except LayoutError as exc:
        try:
            fallback = load_layout("default") if name != "default" else Layout(name="default")
        except LayoutError:  # a broken `default.yaml` of the user's
            fallback = Layout(name="default")
        return fallback, f"{str(exc).rstrip('.')} (the default layout is used)"


def layout_json_schema() -> dict[str, Any]:
    """The layout JSON Schema, the panes listed (`cockpit config schema layout`)."""
    return json_schema(
        layout_schema(COCKPIT_PANES, CLUSTER_PANES),
        "ray-cockpit layout",
        "A ray-cockpit layout (layouts/NAME.yaml): the panes of the cockpit screen (key 0) and the Cluster "
        "screen (key 1). A NAME.tcss beside it styles it further.",
    )
