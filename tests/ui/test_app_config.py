"""The app runs on the configuration it is given (the command line loads it once): its state holds it and
its feeds' cadences, the hang default and the role table read it, whatever `config.yaml` says on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.config import settings
from cockpit.core.config.settings import load
from cockpit.ui.app import CockpitApp
from tests.ui.test_fixture_state import fixture_state


async def test_the_app_and_its_feeds_read_the_config_they_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "given.yaml"
    given.write_text(
        "refresh:\n  nodes: 7\n  actors: 2\n  paused: 30\n  hang_check: 9\nhang_after: 90s\n"
        "roles:\n  MyEngine: rollout\n"
    )
    on_disk = tmp_path / "config.yaml"  # what a process-wide reader would see: it must not count
    on_disk.write_text("refresh:\n  nodes: 60\n  actors: 60\nroles:\n  MyEngine: judge\n")
    monkeypatch.setenv(settings.CONFIG_ENV, str(on_disk))
    config = load(given, env={})
    assert config.problems == ()
    state = fixture_state()
    app = CockpitApp(state.target, state=state, offline=True, config=config)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.state.config is config
        assert app.cluster_feed.steady_seconds == 7.0
        assert app.actors_feed.list_seconds == 2.0
        assert app.paused_feed.watch_seconds == 30.0
        assert app.actors_feed.rules.role("MyEngine") == "rollout"
        assert app.state.gpu_board.rules.role("MyEngine") == "rollout"
        assert config.refresh.hang_check == 9.0 and config.hang_after == 90.0
