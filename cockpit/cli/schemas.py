"""Provides the JSON Schemas of the cockpit's YAML files, generated from the declarations the loaders check
against (`PROFILE`, the layout's with the UI's panes, `CONFIG`, `ROLE_TABLE`) and shipped in
`cockpit/schemas/` for editors: `# yaml-language-server: $schema=PATH` at the top of a file, PATH from
`cockpit config schema KIND`.

`scripts/schemas` writes them again after a declaration changed; tests/unit/test_schemas.py fails while a
shipped file differs from what this generates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KINDS = ("profile", "layout", "config", "roles")
"""The kinds of file, each shipped as `KIND.schema.json`."""


def schemas_dir() -> Path:
    from cockpit.core.config import shipped

    return shipped.schemas_dir()


def shipped_path(kind: str) -> Path:
    return schemas_dir() / f"{kind}.schema.json"


def generate(kind: str) -> dict[str, Any]:
    """The JSON Schema of KIND, from its declaration."""
    from cockpit.core.config.schema import json_schema

    if kind == "profile":
        from cockpit.core.jobs.profile_load import PROFILE

        return json_schema(
            PROFILE,
            "ray-cockpit profile",
            "A ray-cockpit job profile (profiles/NAME.yaml): a saved, checked launch of a Ray job. "
            "`cockpit profiles check FILE` checks what JSON Schema cannot (secrets, overrides, the shape).",
        )
    if kind == "layout":
        from cockpit.ui.layouts import layout_json_schema

        return layout_json_schema()
    if kind == "config":
        from cockpit.core.config.settings import CONFIG

        return json_schema(
            CONFIG,
            "ray-cockpit configuration",
            "The ray-cockpit configuration file (~/.config/ray-cockpit/config.yaml); COCKPIT_* variables "
            "override it and `cockpit config show` prints what is in effect.",
        )
    if kind == "roles":
        from cockpit.core.config.role_table import ROLE_TABLE

        return json_schema(
            ROLE_TABLE,
            "ray-cockpit role table",
            "Worker class names or globs to RL roles (~/.config/ray-cockpit/roles.yaml), e.g. "
            "MyRolloutEngine: rollout; they win over the built-in table.",
        )
    raise ValueError(f"no schema of kind {kind!r} (kinds: {', '.join(KINDS)})")


def text(kind: str) -> str:
    """The shipped file's text: sorted nowhere (the keys in declared order), two-space indent."""
    return json.dumps(generate(kind), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    """Write every schema into `cockpit/schemas/`, saying which changed."""
    schemas_dir().mkdir(exist_ok=True)
    for kind in KINDS:
        path = shipped_path(kind)
        new = text(kind)
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if new != old:
            path.write_text(new, encoding="utf-8")
        print(f"{'wrote' if new != old else 'same '} {path}")
    return 0
