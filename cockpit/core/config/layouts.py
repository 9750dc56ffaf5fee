"""Provides named pane arrangements (`--layout NAME`, or `layout:` in config), read from `layouts/*.yaml`.

A layout arranges the cockpit screen (key 0): `cockpit:` is a list of rows, each a pane or a list of
panes side by side; `cluster:` orders the Cluster screen's panes. A `NAME.tcss` beside `NAME.yaml` styles
the screen further (row heights, pane widths: rows are `#row-1` ..., panes `#pane-NAME`). The user's
layouts in `ray-cockpit/layouts/` of the config directory come before the shipped ones of the same name.
A layout that cannot be used is one line, `FILE:LINE: what is wrong (panes: ...)`, and the cockpit falls
back to the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.core.config.shipped import layouts_dir
from cockpit.core.errors import CockpitError

CLUSTER_PANES = ("join", "nodes", "jobs")
"""The panes the Cluster screen knows, in their default order."""
COCKPIT_PANES = ("join", "nodes", "gpu_heatmap", "gpu_list", "jobs", "driver_log", "paused", "metrics")
"""The panes of the cockpit screen: each the widget of its own screen, reading the same state."""
DEFAULT_COCKPIT: tuple[tuple[str, ...], ...] = (("join",), ("nodes",), ("jobs", "paused"), ("driver_log",))
"""The cockpit screen when no layout file is found (an installed wheel without `layouts/`)."""
KEYS = ("description", "cluster", "cockpit")


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


def shipped_dir() -> Path:
    return layouts_dir()


def layouts_dirs() -> list[Path]:
    """Where layouts are looked for, first match wins: the user's, then the shipped ones."""
    from cockpit.core.config.settings import config_dir

    return [config_dir() / "layouts", shipped_dir()]


def known_layouts() -> list[str]:
    return sorted({p.stem for d in layouts_dirs() if d.is_dir() for p in d.glob("*.yaml")} | {"default"})


def load_layout(name: str) -> Layout:
    """The layout NAME; `default` exists even without the layouts folder (an installed wheel).

    Raises:
        CockpitError: one line, `FILE:LINE: ...`, naming the panes that exist when a pane is wrong.
    """
    path = next((d / f"{name}.yaml" for d in layouts_dirs() if (d / f"{name}.yaml").is_file()), None)
    if path is None:
        if name == "default":
            return Layout(name="default")
        raise CockpitError(f"no layout named {name!r} (layouts: {', '.join(known_layouts())}).")
    from cockpit.core.config.yaml_file import read_yaml

    node, doc = read_yaml(path)  # ProfileError (a CockpitError): FILE:LINE: not valid YAML ...
    if doc is None:
        return Layout(name=name)
    if not isinstance(doc, dict):
        raise CockpitError(f"{path}:1: a layout is a mapping with {', '.join(KEYS)}.")
    items = {str(k.value): (k, v) for k, v in node.value} if node is not None else {}
    for key, (key_node, _value) in items.items():
        if key not in KEYS:
            raise CockpitError(
                f"{path}:{_line(key_node)}: {key!r} is not a layout key (keys: {', '.join(KEYS)})."
            )
    cluster = (
        tuple(_panes(path, items.get("cluster"), "cluster", CLUSTER_PANES, flat=True)[0]) or CLUSTER_PANES
    )
    rows = tuple(
        tuple(row) for row in _panes(path, items.get("cockpit"), "cockpit", COCKPIT_PANES, flat=False)
    )
    css_path = path.with_suffix(".tcss")
    css = ""
    if css_path.is_file():
        from cockpit.core.config.yaml_file import read_bytes

        css = read_bytes(css_path).decode("utf-8", errors="replace")
    return Layout(
        name=name,
        cluster=cluster,
        cockpit=rows or DEFAULT_COCKPIT,
        css=css,
        css_path=css_path if css else None,
    )


def load_layout_or_default(name: str) -> tuple[Layout, str | None]:
    """The layout NAME, or the default one and the line saying why NAME could not be used."""
    try:
        return load_layout(name), None
    except CockpitError as exc:
        fallback = load_layout("default") if name != "default" else Layout(name="default")
        return fallback, f"{str(exc).rstrip('.')} (the default layout is used)"


def _line(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _panes(
    path: Path, entry: tuple[Any, Any] | None, key: str, known: tuple[str, ...], flat: bool
) -> list[list[str]]:
    """The rows of panes under KEY (one row when FLAT), each pane checked against KNOWN."""
    import yaml

    if entry is None:
        return [[]]
    key_node, value = entry
    shape = "a list of panes" if flat else "a list of rows, each a pane or a list of panes"
    if not isinstance(value, yaml.SequenceNode) or not value.value:
        raise CockpitError(f"{path}:{_line(key_node)}: {key} must be {shape} (panes: {', '.join(known)}).")
    rows: list[list[str]] = []
    for item in [value] if flat else value.value:
        cells = item.value if isinstance(item, yaml.SequenceNode) else [item]
        row: list[str] = []
        for cell in cells:
            name = cell.value if isinstance(cell, yaml.ScalarNode) else None
            if name not in known:
                shown = repr(name) if name is not None else "a nested list"
                raise CockpitError(
                    f"{path}:{_line(cell)}: {key}: unknown pane {shown} (panes: {', '.join(known)})."
                )
            row.append(name)
        if not row:
            raise CockpitError(f"{path}:{_line(item)}: {key}: an empty row (panes: {', '.join(known)}).")
        rows.append(row)
    return rows
