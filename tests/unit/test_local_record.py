"""What the cockpit remembers of its local cluster: the record and the token, with no cluster running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cockpit.core.local import record
from cockpit.core.local.record import LocalCluster, LocalClusterError, LocalNode

CLUSTER = LocalCluster(root="/tmp/rc", cluster_id="abc", gcs_port=1, dashboard_port=2, client_port=3)


def test_record_and_token_round_trip_and_are_forgotten(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cluster = LocalCluster(root="/tmp/rc", cluster_id="abc", gcs_port=1, dashboard_port=2, client_port=3)
    cluster.nodes.append(LocalNode(index=0, temp_dir="/tmp/rc/n0", agent_port=4, num_gpus=2, num_cpus=1))
    record.save(cluster, state)
    record.save_token("secret", state)
    assert record.load(state) == cluster
    assert record.cluster_token(state) == "secret"
    assert state.stat().st_mode & 0o777 == 0o700
    assert record.token_file(state).stat().st_mode & 0o777 == 0o600
    record.save_token(None, state)  # a new cluster without token auth: the old token must not linger
    assert record.cluster_token(state) is None
    record.forget(state)
    assert record.load(state) is None and not list(state.iterdir())


def test_an_unreadable_record_is_no_cluster(tmp_path: Path) -> None:
    (tmp_path / "local.json").write_text("{not json")
    assert record.load(tmp_path) is None and record.cluster_token(tmp_path) is None


def test_a_state_directory_others_can_enter_is_refused(tmp_path: Path) -> None:
    """The token must not be written where another user could read it or plant a link."""
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    for write in (lambda: record.save_token("secret", state), lambda: record.save(CLUSTER, state)):
        with pytest.raises(LocalClusterError, match=rf"{state} .*mode 0755.*chmod 700") as info:
            write()
        assert "\n" not in str(info.value)
    assert list(state.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_state_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 65534, 65534)
    with pytest.raises(LocalClusterError, match="not yours"):
        record.save_token("secret", state)


def test_a_symlinked_state_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    (tmp_path / "state").symlink_to(real)
    with pytest.raises(LocalClusterError, match="symbolic link"):
        record.save_token("secret", tmp_path / "state")
    assert list(real.iterdir()) == []
