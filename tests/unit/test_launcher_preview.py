"""The launcher's preview shows the exact request with secrets masked as the mask itself (`••••••`), not
as JSON's escapes of it (`\\u2022...`), and the profile's text as typed (non-ASCII too), never a value."""

from __future__ import annotations

from pathlib import Path

from cockpit.core.jobs import profiles
from cockpit.core.text import MASK
from cockpit.ui.screens.launcher import preview_text


def test_the_preview_shows_the_mask_and_never_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        'name: secret-preview\nentrypoint: "python3 train.py"\n'
        'runtime_env:\n  env_vars:\n    WANDB_API_KEY: "${env:COCKPIT_PREVIEW_SECRET}"\n    RUN: "训练-1"\n'
    )
    profile = profiles.load(path)
    request = profiles.render(profile, mask=True, check_secrets=False)
    shown = preview_text(profile, request, (), force=False).plain
    assert f'"WANDB_API_KEY": "{MASK}"' in shown and "\\u2022" not in shown
    assert '"RUN": "训练-1"' in shown
