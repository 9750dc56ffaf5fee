"""Provides where the files shipped with the cockpit are: its profiles and its layouts (with their styles).

They travel inside the package, in `cockpit/shipped/`, and are found with `importlib.resources`: in an
installed wheel that is `site-packages/cockpit/shipped/`, in a checkout (an editable install, or
PYTHONPATH) it is the source tree, where `cockpit/shipped/profiles` and `cockpit/shipped/layouts` are
symlinks to the top-level `profiles/` and `layouts/`, the one place they are written. The build copies
the files behind the links into the wheel and the sdist (`[tool.setuptools.package-data]`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_dir(name: str) -> Path:
    """The shipped directory NAME (`profiles`, `layouts`), symlinks resolved: the same path whichever way
    it was reached, so a search path that also reaches it through `./profiles` sees one directory.

    The cockpit is never imported from a zip file; if it were, the path does not exist and nothing
    shipped is found (the layouts fall back to their built-in default).
    """
    folder = resources.files("cockpit") / "shipped" / name
    return Path(str(folder)).resolve()


def profiles_dir() -> Path:
    """The profiles shipped with the cockpit: the demo's and the worked examples of the frameworks."""
    return shipped_dir("profiles")


def layouts_dir() -> Path:
    """The layouts shipped with the cockpit, each `NAME.yaml` with its `NAME.tcss` beside it if styled."""
    return shipped_dir("layouts")


def schemas_dir() -> Path:
    """The JSON Schemas of the cockpit's YAML files (`KIND.schema.json`), for editors."""
    return Path(str(resources.files("cockpit") / "schemas")).resolve()
