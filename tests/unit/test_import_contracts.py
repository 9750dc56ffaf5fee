"""The layers hold: import-linter's contracts (`[tool.importlinter]` in pyproject.toml) pass on the tree,
and they fail, naming the contract, when a module imports the wrong way.

The wrong-way imports are written into a copy of the package (never the real one), one per kind of
contract: the core reaching into the UI, a low subject package importing a higher one, a cycle between
two modules of one package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = re.findall(
    r'^name = "(.+)"$', (REPO / "pyproject.toml").read_text().partition("[tool.importlinter]")[2], re.M
)


def verdicts(output: str) -> dict[str, str]:
    """Contract name -> KEPT or BROKEN, from lint-imports' report (it wraps long names)."""
    flat = " ".join(output.split())
    return {name: "BROKEN" if f"{name} BROKEN" in flat else "KEPT" for name in CONTRACTS if name in flat}


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(REPO / "cockpit", root / "cockpit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_tree_keeps_every_contract() -> None:
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert verdicts(result.stdout) == dict.fromkeys(CONTRACTS, "KEPT")


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("core/cluster/join.py", "from cockpit.ui import state", "The command line drives the UI"),
        ("core/snapshots.py", "import textual", "The core is headless"),
        ("core/cluster/join.py", "from cockpit.core.doctor import hang", "Core subjects"),
        ("ui/widgets/status_bar.py", "from cockpit.ui import app", "Screens, widgets and feeds"),
        ("core/doctor/stacks.py", "from cockpit.core.doctor import gather", "No import cycle"),
    ],
)
def test_a_wrong_way_import_breaks_its_contract(copy: Path, module: str, line: str, contract: str) -> None:
    path = copy / "cockpit" / module
    original = path.read_text()
    # Inside a function: a lazy import is an import all the same.
    path.write_text(original + f"\n\ndef _wrong_way() -> None:\n    {line}  # noqa\n")
    try:
        result = lint(copy)
    finally:
        path.write_text(original)
    assert result.returncode == 1, result.stdout
    (name,) = [name for name in CONTRACTS if name.startswith(contract)]
    # A wrong-way import often closes a cycle too, so another contract may break beside the one named.
    assert verdicts(result.stdout)[name] == "BROKEN", result.stdout


def test_the_core_is_packages_by_subject_and_no_module_is_over_600_lines() -> None:
    core = REPO / "cockpit" / "core"
    shared = sorted(p.stem for p in core.glob("*.py") if p.stem != "__init__")
    assert shared == ["errors", "heap", "snapshots", "targets", "text", "units"]
    packages = sorted(p.parent.name for p in core.glob("*/__init__.py"))
    assert len(packages) >= 10
    too_long = {
        str(p.relative_to(REPO)): n
        for p in (REPO / "cockpit").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert too_long == {}
