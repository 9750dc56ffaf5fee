"""Pre-flight checks: cluster shape, framework shape overrides, RLinf placement, secrets, upload size."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.jobs import profiles
from cockpit.core.jobs.overrides import parse_overrides
from cockpit.core.jobs.preflight import placement_check, preflight
from cockpit.core.snapshots import NodeSnapshot


def nodes(count: int, gpus: float, dead: int = 0) -> list[NodeSnapshot]:
    return [
        NodeSnapshot(
            node_id=f"{i:056x}",
            ip="10.0.0.1",
            hostname=f"gpu{i}",
            is_head=i == 0,
            state="DEAD" if i >= count else "ALIVE",
            state_message="",
            start_time=1.0,
            end_time=None,
            logical_cpus=8,
            logical_gpus=gpus,
        )
        for i in range(count + dead)
    ]


def profile(tmp_path: Path, text: str) -> profiles.Profile:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return profiles.load(path)


def by_name(checks: list, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in checks if c.name.startswith(name))


def test_shape_asked_vs_alive(tmp_path: Path) -> None:
    p = profile(tmp_path, "entrypoint: x\ncluster: {nodes: 2, gpus_per_node: 8}\n")
    assert by_name(preflight(p, (), nodes(2, 8)), "cluster shape").status == "ok"
    short = by_name(preflight(p, (), nodes(1, 8, dead=1)), "cluster shape")
    assert short.blocking and "1 alive node(s), 1 with ≥8 GPUs" in short.detail
    assert by_name(preflight(p, (), None), "cluster shape").status == "info"


def test_verl_shape_overrides_against_the_cluster(tmp_path: Path) -> None:
    p = profile(
        tmp_path,
        "framework: verl\nentrypoint: python3 -m verl.trainer.main_ppo\n"
        "cluster: {nodes: 2, gpus_per_node: 8}\noverrides:\n  - trainer.nnodes=${cluster.nodes}\n"
        "  - trainer.n_gpus_per_node=${cluster.gpus_per_node}\n",
    )
    assert by_name(preflight(p, (), nodes(2, 8)), "verl").status == "ok"
    # A command-line override asking for more nodes than alive blocks the submit.
    too_big = by_name(preflight(p, parse_overrides(["trainer.nnodes=4"]), nodes(2, 8)), "verl")
    assert too_big.blocking and too_big.key == "trainer.nnodes" and "asks 4 x 8 GPUs" in too_big.detail


def test_nemo_rl_shape(tmp_path: Path) -> None:
    p = profile(
        tmp_path,
        "framework: nemo_rl\nentrypoint: uv run examples/run_grpo_math.py\n"
        "overrides: [cluster.num_nodes=2, cluster.gpus_per_node=8]\n",
    )
    assert by_name(preflight(p, (), nodes(2, 4)), "NeMo RL").blocking
    assert by_name(preflight(p, (), nodes(2, 8)), "NeMo RL").status == "ok"


@pytest.mark.parametrize(
    ("placement", "status", "fragment"),
    [
        ({"rollout": "0-19", "inference": "20-23", "actor": "24-31"}, "ok", "cover GPUs 0-31"),
        ({"actor,rollout": "all"}, "ok", "cover GPUs 0-31"),
        (
            {"rollout": "0-19", "inference": "19-23", "actor": "24-31"},
            "fail",
            "inference overlaps rollout at GPU 19",
        ),
        ({"rollout": "0-19", "actor": "24-31"}, "fail", "GPUs 20-23 are given to no component"),
        ({"rollout": "0-40"}, "fail", "outside 0-31"),
        ({"rollout": "first-half"}, "fail", "not a range"),
    ],
)
def test_rlinf_placement(placement: dict[str, str], status: str, fragment: str) -> None:
    values = {f"cluster.component_placement.{k}": v for k, v in placement.items()}
    check = placement_check(values, 32)
    assert check is not None and check.status == status and fragment in check.detail


def test_secrets_fail_at_submit_and_warn_in_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    p = profile(
        tmp_path, "entrypoint: x\nruntime_env:\n  env_vars: {WANDB_API_KEY: '${env:WANDB_API_KEY}'}\n"
    )
    assert by_name(preflight(p, (), None, at_submit=True), "secrets").blocking
    assert by_name(preflight(p, (), None, at_submit=False), "secrets").status == "warn"
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    ok = by_name(preflight(p, (), None), "secrets")
    assert ok.status == "ok" and "s3cr3t-value" not in repr(preflight(p, (), None))


def test_upload_size_and_git_left_out(tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / ".git").mkdir(parents=True)
    (code / ".git" / "big").write_bytes(b"x" * 1024)
    (code / "train.py").write_text("print(1)\n")
    p = profile(tmp_path, f"entrypoint: python3 train.py\nworking_dir: {code}\n")
    check = by_name(preflight(p, (), None), "working_dir upload")
    assert check.status == "ok" and ".git left out" in check.detail
    request = profiles.render(p)
    assert request["runtime_env"]["working_dir"] == str(code) and request["runtime_env"]["excludes"] == [
        ".git"
    ]
    in_place = profile(tmp_path, "entrypoint: python3 train.py\nworking_dir: /shared/not/here\n")
    assert profiles.render(in_place)["entrypoint"] == "cd /shared/not/here && python3 train.py"


def test_checks_read_split_overrides_later_winning_quotes_as_written(tmp_path: Path) -> None:
    p = profile(
        tmp_path,
        "framework: verl\nentrypoint: python3 -m verl.trainer.main_ppo\n"
        "cluster: {nodes: 2, gpus_per_node: 8}\n"
        "overrides:\n  - trainer.nnodes=${cluster.nodes}\n  - trainer.logger='[\"console\"]'\n",
    )
    extra = parse_overrides(["+x.y=1", "trainer.nnodes=3"])
    values = profiles.override_values(p, extra)
    assert values == {"trainer.nnodes": "3", "trainer.logger": "'[\"console\"]'", "x.y": "1"}
    assert profiles.override_values(p)["trainer.nnodes"] == "2"
