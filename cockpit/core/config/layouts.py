"""Provides the layout files (`--layout NAME`, or `layout:` in config): where `layouts/NAME.yaml` is, and
one read into a `LayoutFile`.

A layout arranges the cockpit screen (key 0): `cockpit:` is a list of rows, each a pane or a list of
panes side by side; `cluster:` orders the Cluster screen's panes. The user's layouts in
`ray-cockpit/layouts/` of the config directory come before the shipped ones of the same name. The panes
themselves are the UI's: `cockpit.ui.layouts` passes the names it has to `read_layout` (which checks each
pane against them) and to `layout_schema` (the layout JSON Schema lists them), and reads the `NAME.tcss`
beside the file. A layout that cannot be used is one `LayoutError` line, `FILE:LINE: what is wrong`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.core.config import schema
from cockpit.core.config.schema import Items, Key, OneOf, Record, Text
from cockpit.core.config.settings import config_dir
from cockpit.core.config.shipped import layouts_dir
from cockpit.core.config.yaml_file import ConfigFileError


class LayoutError(ConfigFileError):
    """A layout that cannot be used; the message (always one line) names file, line and key."""

    noun = "a layout"


@dataclass(frozen=True)
class LayoutFile:
    """A layout file as written: empty where it says nothing (the UI's defaults apply)."""

    name: str
    path: Path | None = None
    """None: `default` without a file (an installed wheel without `layouts/`)."""
    description: str = ""
    cluster: tuple[str, ...] = ()
    """Panes of the Cluster screen, top to bottom."""
    cockpit: tuple[tuple[str, ...], ...] = ()
    """Rows of the cockpit screen, top to bottom; the panes of a row side by side."""


KEYS = ("description", "cluster", "cockpit")


def layout_schema(cockpit_panes: Sequence[str], cluster_panes: Sequence[str]) -> Record:
    """The layout file's form, with the panes the UI has: the checks and the layout JSON Schema."""

    def pane(known: Sequence[str]) -> Text:
        return Text(choices=tuple(known), says="unknown pane {value} (panes: {choices}).")

    row = Items(pane(cockpit_panes), numbered=False, empty="an empty row: give a pane or a list of panes.")
    return Record(
        keys=(
            Key("description", Text(), "what the layout is for"),
            Key(
                "cluster",
                Items(pane(cluster_panes), numbered=False, empty="give at least one pane."),
                "panes of the Cluster screen (key 1), top to bottom",
            ),
            Key(
                "cockpit",
                Items(
                    OneOf((pane(cockpit_panes), row), says="a row is a pane or a list of panes, not {kind}."),
                    numbered=False,
                    empty="give at least one row.",
                ),
                "rows of the cockpit screen (key 0), top to bottom: each a pane or a list of panes side "
                "by side",
            ),
        ),
        doc="A ray-cockpit layout: the panes of the cockpit screen (key 0) and the Cluster screen (key 1).",
        says=f"a layout is a mapping with {', '.join(KEYS)}, not {{kind}}.",
        unknown="{key} is not a layout key (keys: {keys}).",
        unknown_named=False,
    )


def shipped_dir() -> Path:
    return layouts_dir()


def layouts_dirs() -> list[Path]:
    """Where layouts are looked for, first match wins: the user's, then the shipped ones."""
    return [config_dir() / "layouts", shipped_dir()]


def known_layouts() -> list[str]:
    return sorted({p.stem for d in layouts_dirs() if d.is_dir() for p in d.glob("*.yaml")} | {"default"})


def read_layout(name: str, cockpit_panes: Sequence[str], cluster_panes: Sequence[str]) -> LayoutFile:
    """The layout NAME, its panes checked against the ones given; `default` exists even without the
    layouts folder (an installed wheel), as a LayoutFile that says nothing.

    Raises:
        LayoutError: one line, `FILE:LINE: ...`, naming the panes that exist when a pane is wrong.
    """
    path = next((d / f"{name}.yaml" for d in layouts_dirs() if (d / f"{name}.yaml").is_file()), None)
    if path is None:
        if name == "default":
            return LayoutFile(name="default")
        raise LayoutError(f"no layout named {name!r} (layouts: {', '.join(known_layouts())}).")
    values, _node = schema.load(path, layout_schema(cockpit_panes, cluster_panes), LayoutError, empty={})
    return LayoutFile(
        name=name,
        path=path,
        description=values.get("description", ""),
        cluster=values.get("cluster", ()),
        cockpit=tuple(row if isinstance(row, tuple) else (row,) for row in values.get("cockpit", ())),
    )
