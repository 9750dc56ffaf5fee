"""What the cockpit remembers of its local cluster: the record and the token, with no cluster running."""

from __future__ import annotations

from pathlib import Path

from cockpit.core.local import record
from cockpit.core.local.record import LocalCluster, LocalNode


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
