"""The headless core never imports Textual, and light commands never import Ray.

These run the real thing in a subprocess and look at `sys.modules`: the only way to prove a deferral
actually defers.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import cockpit
import cockpit.core


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_core_imports_no_textual_and_no_ray() -> None:
    names = [
        m.name
        for m in pkgutil.walk_packages(cockpit.core.__path__, "cockpit.core.")
        if m.name != "cockpit.core.local.processes"
    ]
    loaded = modules_after("\n".join(f"import {n}" for n in names))
    assert set(names) <= loaded
    assert not any(m == "textual" or m.startswith("textual.") for m in loaded)
    assert "ray" not in loaded


def test_local_cluster_processes_do_not_import_textual() -> None:
    loaded = modules_after("import cockpit.core.local.processes")
    assert not any(m.startswith("textual") for m in loaded)


def test_status_help_imports_no_ray_and_no_textual() -> None:
    code = (
        "import sys\nfrom cockpit import cli\n"
        "try:\n    cli.main(['status', '--help'])\nexcept SystemExit:\n    pass"
    )
    loaded = modules_after(code)
    assert "cockpit.cli" in loaded
    assert "ray" not in loaded
    assert not any(m.startswith("textual") for m in loaded)


def test_every_command_module_imports_no_ray_no_textual_no_asyncssh() -> None:
    cli = Path(cockpit.__file__).parent / "cli"
    names = sorted(p.stem for p in cli.glob("*.py") if p.stem != "__main__")
    assert {"common", "cluster", "jobs", "profiles", "tui", "gpu"} <= set(names)
    loaded = modules_after("\n".join(f"import cockpit.cli.{n}" for n in names if n != "__init__"))
    assert "ray" not in loaded and "asyncssh" not in loaded
    assert not any(m == "textual" or m.startswith("textual.") for m in loaded)


def test_status_command_path_imports_no_ray() -> None:
    # The real `cockpit status` run to its end (nothing listens on port 1: exit 1, one line).
    code = "from cockpit import cli\nassert cli.main(['status', 'http://127.0.0.1:1']) == 1"
    loaded = modules_after(code)
    assert "cockpit.cli.cluster" in loaded and "cockpit.core.cluster.dashboard" in loaded
    assert "ray" not in loaded
    assert not any(m.startswith("textual") for m in loaded)
    # asyncssh (~100 ms, ~15 MiB) loads only when a target is an SSH destination.
    assert "asyncssh" not in loaded
    # The dashboard client speaks HTTP with h11: aiohttp's import alone was ~100 ms of every start.
    assert "h11" in loaded and "aiohttp" not in loaded


def test_the_tui_imports_no_aiohttp_and_no_ray() -> None:
    loaded = modules_after("import cockpit.ui.app")
    assert "cockpit.core.cluster.dashboard" in loaded
    assert "aiohttp" not in loaded and "ray" not in loaded


def test_ssh_errors_import_no_asyncssh() -> None:
    """The UI and every command catch these, SSH target or not."""
    loaded = modules_after("import cockpit.core.ssh.errors")
    assert "cockpit.core.ssh.errors" in loaded and "asyncssh" not in loaded


def test_the_app_imports_no_screen_before_it_is_shown_and_the_key_map_all_of_them() -> None:
    """Start-up imports only the screen shown first; what lists every binding imports them all."""
    screens = {f"cockpit.ui.screens.{name}" for name in ("actors", "jobs", "metrics", "cockpit", "doctor")}
    assert not screens & modules_after("import cockpit.ui.app")
    assert screens <= modules_after(
        "import cockpit.ui.app\nfrom cockpit.ui.keymap import all_bindings\nall_bindings()"
    )
