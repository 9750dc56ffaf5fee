"""The front door: `cockpit` alone shows what to run next (never argparse's usage error), `--version` and
`python -m cockpit` work, and the dashboard client names the cockpit and its version in `User-Agent`
(seen by a real HTTP server on loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

import cockpit
from cockpit.core.cluster.dashboard import DashboardClient

REPO = Path(__file__).resolve().parents[2]


def run_cockpit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = dict(env or os.environ)
    environment["PYTHONPATH"] = f"{REPO}{os.pathsep}{environment.get('PYTHONPATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "cockpit", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def test_cockpit_alone_says_what_to_run_next(tmp_path: Path) -> None:
    config = tmp_path / "ray-cockpit" / "config.yaml"
    env = {**os.environ, "COCKPIT_CONFIG": str(config)}
    done = run_cockpit(env=env)
    assert done.returncode == 0 and done.stderr == ""
    text = done.stdout
    assert text.startswith(f"ray-cockpit {cockpit.__version__}: a terminal cockpit")
    for line in ("  cockpit demo\n", "  cockpit connect HOST\n", "  cockpit profiles list\n"):
        assert line in text
    assert f"Settings: {config} (not there yet" in text
    assert "cockpit completion bash|zsh|fish" in text
    assert "usage:" not in text and "Traceback" not in text
    config.parent.mkdir()
    config.write_text("theme: light\n")
    assert f"Settings: {config}\n" in run_cockpit(env=env).stdout


def test_version_flag() -> None:
    done = run_cockpit("--version")
    assert (done.returncode, done.stdout) == (0, f"ray-cockpit {cockpit.__version__}\n")


def test_a_command_reads_no_package_metadata_until_it_needs_the_version() -> None:
    """importlib.metadata costs tens of milliseconds to import: `--help`, a TAB's answer and every
    command's start build the parser without it."""
    code = (
        "import sys\nfrom cockpit import cli\n"
        "try:\n    cli.main(['status', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('importlib.metadata' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "False"


def test_an_unknown_command_is_still_a_usage_error() -> None:
    done = run_cockpit("conect")
    assert done.returncode == 2 and "invalid choice: 'conect'" in done.stderr


async def test_the_dashboard_client_sends_the_cockpit_and_its_version() -> None:
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("User-Agent", ""))
        return web.json_response({"version": "4", "ray_version": "2.60.0", "ray_commit": "x"})

    app = web.Application()
    app.router.add_get("/api/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        async with DashboardClient(f"http://127.0.0.1:{port}", token="t0ken") as client:
            assert (await client.version())["ray_version"] == "2.60.0"
    finally:
        await runner.cleanup()
    assert seen == [f"ray-cockpit/{cockpit.__version__}"]


def test_the_tui_start_pauses_the_gc_and_turns_it_on_again_whatever_happens() -> None:
    import gc

    from cockpit.cli.tui import gc_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("the app failed to start")
    assert gc.isenabled()
