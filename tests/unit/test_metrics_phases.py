"""Step anatomy (cockpit.core.metrics.phases) and `cockpit metrics --phases` output, from lines built exactly
as the frameworks print them (no cluster).

Where the timing keys come from (the source read, at the commit fetched):

- verl (volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7): `verl/trainer/ppo/ray_trainer.py`
  lines 1388-1650 (`marked_timer("step")` around `gen`, `reward`, `old_log_prob`, `ref`, `values`, `adv`,
  `update_critic`, `update_actor`, `update_weights`, `testing`, `save_checkpoint`), logged as
  `timing_s/{name}` by `verl/trainer/ppo/metric_utils.py` `compute_timing_metrics` (line 262) beside
  `timing_per_token_ms/{name}`; the line as `concat_dict_to_str` prints it (tests/unit/test_metrics.py).
  The older `timing/{name}` keys: verl's published log, `docs/start/quickstart.rst` line 116.
- NeMo RL (NVIDIA-NeMo/RL @ 7ea279abfbeb698b092856d0dab61e7cf39bc909): `nemo_rl/algorithms/grpo.py` lines
  2832-3570 (the timers) and 3721-3742 (`⏱️  Timing:`, `  • Total step time: {:.2f}s`, then
  `  • {k}: {v:.2f}s ({percent:.1f}%)` sorted by time, biggest first).
- RLinf (RLinf/RLinf @ a3816b596478dcd8a5c69a6ec1468c9519f77b5b): `rlinf/runners/embodied_runner.py`
  lines 497-532 (`step` around `sync_weights`, `generate_rollouts`, `cal_adv_and_returns`,
  `actor_training`) and 345-360 (`time/{k}`, the workers' `time/actor/{k}` ...), shown in
  `print_metrics_table`'s `Time` section.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from cockpit.cli.metrics import _print_phases
from cockpit.core.jobs import profiles
from cockpit.core.metrics.lines import MetricsParser
from cockpit.core.metrics.phases import NEMO_RL, RLINF, RLINF_BAR, VERL, anatomy, detect, profile_keys
from cockpit.core.metrics.series import SeriesStore
from tests.unit.test_metrics import VERL_QUICKSTART, ray_prefix, rlinf_table, verl_line


def store_of(text: str, form: str = "auto") -> SeriesStore:
    store = SeriesStore()
    parser = MetricsParser(form)
    store.extend(parser.feed(text) + parser.flush())
    return store


def verl_step(step: int, gen: float, save: float | None = None) -> str:
    """One TaskRunner line of a PPO step with a critic, NumPy 2 values as pprint writes them."""
    timing = {
        "gen": gen,
        "reward": 0.51,
        "old_log_prob": 3.25,
        "ref": 2.75,
        "values": 2.5,
        "adv": 0.125,
        "update_critic": 10.0,
        "update_actor": 12.5,
        "update_weights": 1.5,
    }
    if save is not None:
        timing["save_checkpoint"] = save
    total = sum(timing.values()) + 0.875  # what no timer covers (the metrics, the logger ...)
    metrics = {"actor/pg_loss": "np.float64(-0.0123)"}
    metrics |= {f"timing_s/{k}": f"np.float64({v!r})" for k, v in timing.items()}
    metrics["timing_s/step"] = f"np.float64({total!r})"
    metrics["timing_per_token_ms/gen"] = "np.float64(0.0123)"
    metrics["timing_s/start_profile"] = "np.float64(0.25)"
    return ray_prefix("TaskRunner", 2109, "10.0.0.2") + verl_line(step, metrics) + "\n"


VERL_LOG = "".join(verl_step(step, 20.0 + step, save=4.0 if step % 5 == 0 else None) for step in range(1, 13))


def test_verl_steps_split_into_their_phases() -> None:
    store = store_of(VERL_LOG)
    assert detect(store.keys()) is VERL
    found = anatomy(store, last=4)
    assert found is not None and found.keys is VERL
    assert [s.step for s in found.steps] == list(range(1, 13))
    step5 = found.steps[4]
    assert step5.total_printed and dict(step5.phases) == {
        "adv": 0.125,
        "gen": 25.0,
        "old_log_prob": 3.25,
        "ref": 2.75,
        "reward": 0.51,
        "save_checkpoint": 4.0,
        "update_actor": 12.5,
        "update_critic": 10.0,
        "update_weights": 1.5,
        "values": 2.5,
    }  # not `step`, not `start_profile` (outside the step), not `timing_per_token_ms/*`
    assert step5.total == pytest.approx(62.135 + 0.875)
    assert step5.other == pytest.approx(0.875)
    # shares over steps 9-12: gen is 21+... seconds of each
    assert found.window == 4 and found.shares[0].name == "gen"
    whole = sum(s.total for s in found.steps[-4:])
    assert found.shares[0].seconds == 29.0 + 30.0 + 31.0 + 32.0
    assert found.shares[0].share == pytest.approx(122.0 / whole)
    assert sum(p.share for p in found.shares) == pytest.approx(1.0)
    ckpt = found.checkpoints
    assert ckpt is not None
    assert (ckpt.count, ckpt.last_step, ckpt.last_seconds, ckpt.mean_seconds) == (2, 10, 4.0, 4.0)
    assert ckpt.share == pytest.approx(4.0 / whole)  # the save at step 10 is in the window
    assert ckpt.steps_since == 2
    assert ckpt.seconds_since == pytest.approx(found.steps[10].total + found.steps[11].total)


def test_older_verl_timing_keys_without_a_total() -> None:
    found = anatomy(store_of(VERL_QUICKSTART + "\n", "verl"))
    assert found is not None and found.keys.framework == "verl" and found.keys.prefix == "timing/"
    (step,) = found.steps
    assert not step.total_printed and step.other == 0.0
    assert dict(step.phases) == {
        "adv": 0.109,
        "gen": 21.47,
        "ref": 4.36,
        "update_actor": 20.314,
        "update_critic": 15.664,
        "values": 5.8,
    }
    assert step.total == pytest.approx(67.717)
    assert found.checkpoints is None


def nemo_timing(step: int, timings: dict[str, float]) -> str:
    """grpo.py's step header and `⏱️  Timing:` section (total first, the rest biggest first)."""
    total = timings["total_step_time"]
    lines = [f"\n{'=' * 25} Step {step}/100 {'=' * 25}", "\n⏱️  Timing:", f"  • Total step time: {total:.2f}s"]
    for k, v in sorted(timings.items(), key=lambda kv: kv[1], reverse=True):
        if k != "total_step_time":
            lines.append(f"  • {k}: {v:.2f}s ({v / total * 100:.1f}%)")
    return "\n".join(lines) + "\n"


NEMO_TIMINGS = {
    "total_step_time": 61.73,
    "data_processing": 0.42,
    "prepare_for_generation/total": 3.5,
    "prepare_for_generation/transfer_and_update_weights": 3.1,
    "generation": 25.0,
    "reward_calculation": 0.8,
    "logprob_inference_prep": 0.6,
    "policy_and_reference_logprobs": 5.0,
    "advantage_calculation": 0.11,
    "training_prep": 0.7,
    "policy_training": 20.12,
    "checkpointing": 4.5,
}


def test_nemo_rl_timing_section() -> None:
    store = store_of(nemo_timing(3, NEMO_TIMINGS) + nemo_timing(4, NEMO_TIMINGS | {"checkpointing": 0.0}))
    assert detect(store.keys()) is NEMO_RL
    found = anatomy(store)
    assert found is not None
    step3 = found.steps[0]
    assert step3.step == 3 and step3.total == 61.73 and step3.total_printed
    phases = dict(step3.phases)
    # the weight transfer is inside prepare_for_generation/total: not counted twice
    assert "prepare_for_generation_transfer_and_update_weights" not in phases
    assert phases["prepare_for_generation_total"] == 3.5 and phases["checkpointing"] == 4.5
    assert len(phases) == 10
    assert step3.other == pytest.approx(61.73 - 60.75)
    assert found.checkpoints is not None and found.checkpoints.last_step == 4


def test_rlinf_time_section() -> None:
    table = rlinf_table(
        11,
        100,
        {
            "Time": [
                "step=6.917",
                "sync_weights=0.412",
                "generate_rollouts=3.210",
                "cal_adv_and_returns=0.050",
                "actor_training=2.500",
                "actor/forward=1.100",
            ],
            "Rollout": ["rewards=0.500"],
        },
    )
    store = store_of(table, "rlinf")
    assert detect(store.keys()) is RLINF
    found = anatomy(store)
    assert found is not None
    (step,) = found.steps
    assert step.step == 12 and step.total == 6.917
    assert dict(step.phases) == {
        "actor_training": 2.5,
        "cal_adv_and_returns": 0.05,
        "generate_rollouts": 3.21,
        "sync_weights": 0.412,
    }  # time/actor/forward is a worker's timer inside actor_training
    assert step.other == pytest.approx(6.917 - 6.172)
    assert found.checkpoints is None


def test_rlinf_reasoning_progress_bar_timings() -> None:
    """RLinf's reasoning runner prints its timers only in the progress bar's postfix, as `<name>_time`
    (rlinf/runners/reasoning_runner.py: `logging_metrics = {f"{k}_time": v ...}`; `time/*` goes to
    TensorBoard and W&B): both shipped RLinf profiles showed no step anatomy."""
    from tests.unit.test_metrics import rlinf_bar

    timings = {
        "step_time": 7.0,
        "sync_weights_time": 0.5,
        "rollout_time": 3.25,
        "reward_time": 0.25,
        "actor/training_time": 2.5,  # a worker's duration, overlapping the others (nested: not counted)
        "rewards": 0.5,
        "actor/lr": 1e-05,
    }
    text = "".join(rlinf_bar(step, 100, timings) for step in (1, 2)) + "\n"
    store = store_of(text, "rlinf")
    assert detect(store.keys()) is RLINF_BAR
    found = anatomy(store)
    assert found is not None and found.keys.pattern == "*_time"
    assert [s.step for s in found.steps] == [1, 2]
    assert dict(found.steps[-1].phases) == {"reward": 0.25, "rollout": 3.25, "sync_weights": 0.5}
    assert found.steps[-1].total == 7.0 and found.steps[-1].other == pytest.approx(3.0)
    assert detect(["rollout_time", "rewards"]) is None  # a name ending in `_time` alone says too little


def test_phases_that_add_up_past_the_total_show_no_other() -> None:
    line = (
        verl_line(1, {"timing_s/gen": "1.5", "timing_s/update_actor": "2.0", "timing_s/step": "3.0"}) + "\n"
    )
    found = anatomy(store_of(line))
    assert found is not None
    (step,) = found.steps
    assert step.other == 0.0 and step.total == 3.5 and step.total_printed


def test_no_timing_keys_is_none() -> None:
    assert anatomy(store_of("step=1 reward=0.5 kl=0.02\n")) is None


def test_cli_json_gives_the_seconds_as_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert _print_phases(store_of(VERL_LOG), "json", 3, "raysubmit_1") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["framework"] == "verl" and doc["window"] == 3
    assert [s["step"] for s in doc["steps"]] == [10, 11, 12]
    assert doc["steps"][0]["phases"]["save_checkpoint"] == 4.0
    assert doc["steps"][0]["phases"]["gen"] == 30.0 and doc["steps"][0]["total_printed"] is True
    assert doc["steps"][1]["other"] == pytest.approx(0.875)
    assert doc["checkpoints"]["last_step"] == 10 and doc["checkpoints"]["steps_since"] == 2
    assert next(iter(doc["shares"])) == "gen"


def test_cli_csv_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    store = store_of(VERL_LOG)
    assert _print_phases(store, "csv", 2, "raysubmit_1") == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0][:3] == ["step", "total", "gen"] and rows[0][-1] == "other"
    assert [r[0] for r in rows[1:]] == ["11", "12"] and rows[1][2] == "31"
    assert _print_phases(store, "table", 20, "raysubmit_1") == 0
    out = capsys.readouterr().out
    assert "verl phases (timing_s/*), last 12 steps 1-12:" in out
    assert "checkpoint: 2 saves, last at step 10" in out


def test_cli_without_timings_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert _print_phases(store_of("step=1 reward=0.5\n"), "json", 20, "raysubmit_1") == 1
    assert "no phase timings" in capsys.readouterr().err


def test_a_profile_names_its_own_phase_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "entrypoint: python train.py\nframework: generic\n"
        "phases:\n  prefix: t/\n  total: step_total\n  checkpoint: save\n",
        encoding="utf-8",
    )
    profile = profiles.load(path)
    assert profile.phases == {"prefix": "t/", "total": "step_total", "checkpoint": "save"}
    keys = profile_keys(profile.phases, profile.framework)
    assert keys is not None and (keys.prefix, keys.total, keys.checkpoint) == ("t/", "step_total", "save")
    store = store_of("step=1 t/rollout=2.5 t/train=1.5 t/save=1 t/step_total=5.5 loss=0.1\n", "generic")
    assert _print_phases(store, "json", 20, "raysubmit_1", keys) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["framework"] == "generic" and doc["prefix"] == "t/"
    assert doc["steps"] == [
        {
            "step": 1,
            "total": 5.5,
            "total_printed": True,
            "phases": {"rollout": 2.5, "save": 1.0, "train": 1.5},
            "other": 0.5,
        }
    ]
    assert doc["checkpoints"]["last_seconds"] == 1.0
    assert profile_keys({}) is None


def test_a_profile_s_phases_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("entrypoint: x\nphases:\n  prefx: t/\n", encoding="utf-8")
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(path)
    assert ":3: phases.prefx: unknown key (expected prefix, total, checkpoint)." in str(info.value)
