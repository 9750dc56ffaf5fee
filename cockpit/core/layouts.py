"""Provides named pane arrangements of the main screen (`--layout NAME`), read from `layouts/*.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from cockpit.core.errors import CockpitError

CLUSTER_PANES = ("join", "nodes", "jobs")
"""The panes the Cluster screen knows, in their default order."""


@dataclass(frozen=True)
class Layout:
    name: str
    cluster: tuple[str, ...] = CLUSTER_PANES
    """Panes of the Cluster screen, top to bottom."""


def layouts_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "layouts"


def load_layout(name: str) -> Layout:
    """The layout NAME; `default` exists even without the layouts folder (an installed wheel)."""
    path = layouts_dir() / f"{name}.yaml"
    if not path.is_file():
        if name == "default":
            return Layout(name="default")
        known = ", ".join(sorted(p.stem for p in layouts_dir().glob("*.yaml"))) or "default"
        raise CockpitError(f"no layout named {name!r} (known: {known}).")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise CockpitError(f"{path}: not valid YAML ({exc}).") from None
    panes = doc.get("cluster", list(CLUSTER_PANES)) if isinstance(doc, dict) else None
    if not isinstance(panes, list) or not panes:
        raise CockpitError(f"{path}: `cluster` must be a list of panes ({', '.join(CLUSTER_PANES)}).")
    unknown = [p for p in panes if p not in CLUSTER_PANES]
    if unknown:
        raise CockpitError(
            f"{path}: cluster: unknown pane {unknown[0]!r} (known: {', '.join(CLUSTER_PANES)})."
        )
    return Layout(name=name, cluster=tuple(panes))
