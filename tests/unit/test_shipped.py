"""What ships with the cockpit, seen from a checkout: `cockpit/shipped/` reaches the top-level profiles/ and
layouts/ (the one place they are written), the package data of pyproject.toml takes every file there, and
nothing in the package finds its files relative to the source tree. (The wheel and the sdist themselves:
tests/e2e/test_installed_wheel.py.)"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

import cockpit
from cockpit.core.config import shipped
from cockpit.core.config.layouts import known_layouts
from cockpit.core.jobs import profiles
from cockpit.ui.layouts import load_layout

if sys.version_info >= (3, 11):
    import tomllib
else:  # `build` (a test extra) brings tomli where tomllib is missing
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_shipped_folders_are_the_top_level_ones() -> None:
    assert shipped.profiles_dir() == (REPO / "profiles").resolve()
    assert shipped.layouts_dir() == (REPO / "layouts").resolve()
    for name in ("profiles", "layouts"):
        link = REPO / "cockpit" / "shipped" / name
        assert link.is_symlink() and link.resolve() == (REPO / name).resolve(), link


def test_every_shipped_file_is_package_data() -> None:
    """A file added to profiles/ or layouts/ (a schema, a style) that no glob takes would be missing
    from every installed cockpit while every test of the checkout passes."""
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["cockpit"]
    for name in ("profiles", "layouts"):
        for path in sorted((REPO / name).rglob("*")):
            if path.is_file():
                inside = f"shipped/{name}/{path.relative_to(REPO / name).as_posix()}"
                assert any(fnmatch.fnmatchcase(inside, g) for g in globs), f"{inside} is not package data"
    package = REPO / "cockpit"
    for data in ("py.typed", "ui/app.tcss", "core/slurm/slurm_up.sh"):
        assert (package / data).is_file() and any(fnmatch.fnmatchcase(data, g) for g in globs), data


def test_the_shipped_profiles_and_layouts_are_found() -> None:
    found, problems = profiles.discover()
    assert problems == []
    assert {p.name for p in found} >= {p.stem for p in (REPO / "profiles").glob("*.yaml")}
    assert set(known_layouts()) == {p.stem for p in (REPO / "layouts").glob("*.yaml")}
    wide = load_layout("wide")
    assert wide.css_path is not None and wide.css_path.parent == shipped.layouts_dir() and wide.css


def test_nothing_in_the_package_finds_files_relative_to_the_source_tree() -> None:
    """`Path(__file__).parents[...]` is `site-packages/` once installed: shipped files are found with
    importlib.resources (cockpit/core/config/shipped.py)."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "cockpit").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"__file__\)?(\.resolve\(\))?\.parents?\b", line)
    ]
    assert offenders == []


def test_the_version_is_pyprojects() -> None:
    assert "version" not in PYPROJECT["project"].get("dynamic", [])
    assert cockpit.__version__ == PYPROJECT["project"]["version"]
