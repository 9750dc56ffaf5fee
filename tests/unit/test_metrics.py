"""The metrics parser and series store (cockpit.core.metrics.lines, cockpit.core.metrics.series).

Where each sample line comes from (the source read, at the commit fetched):

- verl (volcengine/verl @ b178a3cd, 2026-01-29): `verl/utils/logger/aggregate_logger.py`
  `concat_dict_to_str` (`step:{step}` then ` - {key}:{pprint.pformat(value)}` for every number: NumPy 2
  scalars print as `np.float64(...)`), called by `LocalLogger.log` from `verl/utils/tracking.py`
  (`trainer.logger=['console']`) in `verl/trainer/ppo/ray_trainer.py` (`logger.log(data=metrics,
  step=self.global_steps)`), which runs in the `TaskRunner` actor (`verl/trainer/main_ppo.py`). The
  published log is `docs/start/quickstart.rst` lines 116-117.
- NeMo RL (NVIDIA-NeMo/RL @ 7ea279ab, 2026-08-22): `nemo_rl/algorithms/grpo.py` (the `===== Step
  {n}/{total} =====` header, lines 2817-2826; `📊 Training Results:` and `⏱️  Timing:` with their
  `  • Name: value` bullets, lines 3703-3745; `📊 Validation Results:` / `    • Accuracy:`, lines
  4005-4006) and `nemo_rl/algorithms/utils.py` `print_performance_metrics` (`🔍 Performance Metrics:`).
  NeMo RL has no console logger: these prints are what its driver log holds.
- RLinf (RLinf/RLinf @ a3816b59, 2026-08-22): `rlinf/runners/reasoning_runner.py` (`tqdm(desc="Global
  Step", ncols=1650)`, `set_postfix(logging_metrics)` then `update(1)` each step, lines 424-431 and 630;
  tqdm's `format_meter` and `format_num` make the text) and `rlinf/utils/metric_utils.py`
  `print_metrics_table` (the embodied runners' table, lines 540-720).
- Ray 2.60 (`ray/_private/worker.py` `print_worker_logs`: the `(Name pid=N, ip=...)` prefix in cyan;
  `ray/_private/ray_logging/__init__.py` `DedupState.formatted`: ` [repeated Nx across cluster]` in
  green, the first one followed by a note on deduplication).
- The demo: `cockpit/demo/trainer.py` (its driver's `step=` line and its actors' prints).
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.jobs import profiles
from cockpit.core.metrics.lines import (
    FORMATS,
    MAX_KEY_CHARS,
    MAX_LINE_CHARS,
    MetricsParser,
    Sample,
    number,
    parse_format,
    profile_format,
)
from cockpit.core.metrics.series import (
    KeyFilter,
    Series,
    SeriesStore,
    StepRows,
    format_value,
)
from tests.harness.properties import examples

CYAN, GREEN, RESET = "\x1b[36m", "\x1b[32m", "\x1b[0m"


def ray_prefix(name: str, pid: int, ip: str = "") -> str:
    """What Ray 2.60 puts before a worker's line in the driver log."""
    return f"{CYAN}({name} pid={pid}{f', ip={ip}' if ip else ''}){RESET} "


def repeated(count: int, first: bool = False) -> str:
    note = (
        " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
        "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
        "#log-deduplication for more options.)"
        if first
        else ""
    )
    return f"{GREEN} [repeated {count}x across cluster]{note}{RESET}"


def parse(text: str, form: str = "auto") -> list[Sample]:
    parser = MetricsParser(form)
    return parser.feed(text) + parser.flush()


def by_key(samples: list[Sample]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for step, key, value in samples:
        out.setdefault(key, []).append((step, value))
    return out


# -- verl ----------------------------------------------------------------------------------------------------

VERL_QUICKSTART = (
    "step:0 - timing/gen:21.470 - timing/ref:4.360 - timing/values:5.800 - actor/reward_kl_penalty:0.000 - "
    "actor/reward_kl_penalty_coeff:0.001 - timing/adv:0.109 - timing/update_critic:15.664 - "
    "critic/vf_loss:14.947 - critic/vf_clipfrac:0.000 - critic/vpred_mean:-2.056 - "
    "critic/grad_norm:1023.278 - critic/lr(1e-4):0.100 - timing/update_actor:20.314 - "
    "actor/entropy_loss:0.433 - actor/pg_loss:-0.005 - actor/pg_clipfrac:0.000 - actor/ppo_kl:0.000 - "
    "actor/grad_norm:1.992 - actor/lr(1e-4):0.010 - critic/score/mean:0.004 - critic/score/max:1.000 - "
    "critic/score/min:0.000 - critic/rewards/mean:0.004 - critic/rewards/max:1.000 - "
    "critic/rewards/min:0.000 - critic/advantages/mean:-0.000 - critic/advantages/max:2.360 - "
    "critic/advantages/min:-2.280 - critic/returns/mean:0.003 - critic/returns/max:0.000 - "
    "critic/returns/min:0.000 - critic/values/mean:-2.045 - critic/values/max:9.500 - "
    "critic/values/min:-14.000 - response_length/mean:239.133 - response_length/max:256.000 - "
    "response_length/min:77.000 - prompt_length/mean:104.883 - prompt_length/max:175.000 - "
    "prompt_length/min:68.000"
)
"""verl's published console log, docs/start/quickstart.rst line 116 (an older verl: plain floats)."""


def verl_line(step: int, metrics: dict[str, str]) -> str:
    """A line as `concat_dict_to_str` prints it, the values already as `pprint.pformat` writes them."""
    return " - ".join([f"step:{step}", *(f"{k}:{v}" for k, v in metrics.items())])


def test_verl_published_line() -> None:
    samples = parse(VERL_QUICKSTART + "\n", "verl")
    keys = by_key(samples)
    assert len(keys) == 40 and all(step == 0 for step, _, _ in samples)
    assert keys["critic/score/mean"] == [(0, 0.004)]
    assert keys["actor/pg_loss"] == [(0, -0.005)]
    assert keys["critic/lr(1e-4)"] == [(0, 0.1)]  # a key with parentheses, as older verl named it
    assert keys["critic/advantages/mean"] == [(0, -0.0)]
    assert parse(VERL_QUICKSTART + "\n") == samples  # auto reads it the same


def test_verl_numpy2_line_from_the_task_runner_actor() -> None:
    line = ray_prefix("TaskRunner", 2109, "10.0.0.2") + verl_line(
        12,
        {
            "training/global_step": "12",
            "training/epoch": "0",
            "actor/entropy": "np.float64(0.28172561526298523)",
            "actor/pg_loss": "np.float64(-0.0053)",
            "actor/lr": "1e-06",
            "critic/score/mean": "np.float64(0.818)",
            "perf/throughput": "np.float64(631.2970269611557)",
            "val-core/openai/gsm8k/reward/mean@1": "np.float64(0.7)",
            "response_length/clip_ratio": "np.float64(nan)",
            "actor/grad_norm": "inf",
            "flag": "True",  # a bool is a numbers.Number to verl; not a value here
        },
    )
    keys = by_key(parse(line + "\n", "verl"))
    assert keys["actor/entropy"] == [(12, 0.28172561526298523)]
    assert keys["actor/pg_loss"] == [(12, -0.0053)]
    assert keys["actor/lr"] == [(12, 1e-06)]
    assert keys["val-core/openai/gsm8k/reward/mean@1"] == [(12, 0.7)]
    assert keys["training/global_step"] == [(12, 12.0)]
    assert math.isnan(keys["response_length/clip_ratio"][0][1])
    assert keys["actor/grad_norm"] == [(12, math.inf)]
    assert "flag" not in keys
    assert len(keys) == 10


# -- NeMo RL -------------------------------------------------------------------------------------------------

NEMO_STEP = """
========================= Epoch 1/1 =========================

========================= Step 3/100 =========================
▶ Preparing batch...
▶ Generating responses for batch of size 512...
▶ Processing rewards...,
▶ Computing advantages...
▶ Preparing for logprob inference...
▶ Computing logprobs...
▶ Preparing for training...
▶ Training policy...

📊 Training Results:
  • Loss: 0.0123
  • Generation KL Error: 0.0012
  • Avg Reward: 0.4567
  • Mean Generation Length: 312.5000

⏱️  Timing:
  • Total step time: 61.73s
  • policy_training: 30.12s (48.8%)
  • generation: 25.00s (40.5%)
  • logprob_inference: 5.00s (8.1%)

🔍 Performance Metrics:
  • Mean Total Tokens per Sample: 412.50
  • Visualizing Token Imbalance per Generation Worker:
    - Generated Tokens from Worker   0:■■■■■■■■■■■■■■■■■■■■
  • Average Token Imbalance: 12.00%
  • Training FLOPS: 120.00 TFLOPS (15.00 TFLOPS per rank)

📊 Validation Results:
    • Accuracy: 0.3125
"""
"""One GRPO step as grpo.py and print_performance_metrics print it (the values are made up)."""


def test_nemo_rl_step_report() -> None:
    keys = by_key(parse(NEMO_STEP, "nemo_rl"))
    assert keys == {
        "train/loss": [(3, 0.0123)],
        "train/generation_kl_error": [(3, 0.0012)],
        "train/avg_reward": [(3, 0.4567)],
        "train/mean_generation_length": [(3, 312.5)],
        "timing/total_step_time": [(3, 61.73)],
        "timing/policy_training": [(3, 30.12)],
        "timing/generation": [(3, 25.0)],
        "timing/logprob_inference": [(3, 5.0)],
        "perf/mean_total_tokens_per_sample": [(3, 412.5)],
        "perf/average_token_imbalance": [(3, 12.0)],
        "perf/training_flops": [(3, 120.0)],
        "val/accuracy": [(3, 0.3125)],
    }
    assert by_key(parse(NEMO_STEP)) == keys  # auto


def test_nemo_rl_steps_count_on_across_epochs() -> None:
    """NeMo RL prints `Step 1/N` again in each epoch (grpo.py: `current_step = 0  # Reset step counter
    for new epoch`, N = the steps an epoch holds): read as they are, epoch 2's steps looked like a resumed
    run and wiped epoch 1's points. The global step is (epoch - 1) x N + the step, as W&B's."""
    epoch = "========================= Epoch 1/1 =========================\n"
    text = ""
    for e, n, loss in ((1, 1, 0.5), (1, 2, 0.4), (2, 1, 0.3), (2, 2, 0.2)):
        step = NEMO_STEP.replace(epoch, f"===== Epoch {e}/2 =====\n" if n == 1 else "")
        text += step.replace("Step 3/100", f"Step {n}/2").replace("Loss: 0.0123", f"Loss: {loss}")
    for form in ("nemo_rl", "auto"):
        assert by_key(parse(text, form))["train/loss"] == [(1, 0.5), (2, 0.4), (3, 0.3), (4, 0.2)]


def test_nemo_rl_throughputs_under_their_bullet() -> None:
    """print_performance_metrics (nemo_rl/algorithms/utils.py) prints each throughput as a dashed item
    under a bullet with no value of its own; they were all dropped."""
    block = (
        "  • Throughputs (per GPU):\n"
        "    - E2E (Samples/sec/gpu): 1.25\n"
        "    - E2E (Tokens/sec/gpu): 240.00\n"
        "  • Throughputs (per Group):\n"
        "    - Generation Worker Group (Tokens/sec): 1920.50\n"
    )
    text = NEMO_STEP.replace(
        "  • Average Token Imbalance: 12.00%\n", block + "  • Average Token Imbalance: 12.00%\n"
    )
    keys = by_key(parse(text, "nemo_rl"))
    assert keys["perf/throughputs_per_gpu/e2e_samples_sec_gpu"] == [(3, 1.25)]
    assert keys["perf/throughputs_per_gpu/e2e_tokens_sec_gpu"] == [(3, 240.0)]
    assert keys["perf/throughputs_per_group/generation_worker_group_tokens_sec"] == [(3, 1920.5)]
    assert keys["perf/average_token_imbalance"] == [(3, 12.0)]  # the bullet after them is its own again
    assert not any("visualizing" in key or "generated_tokens" in key for key in keys)
    assert by_key(parse(text)) == keys  # auto


def test_nemo_rl_bullets_before_any_step_are_not_metrics() -> None:
    setup = "\n▶ Setting up compute cluster...\n📊 Training Results:\n  • Loss: 1.5\n"
    assert parse(setup, "nemo_rl") == []
    nan_step = NEMO_STEP.replace("Avg Reward: 0.4567", "Avg Reward: nan").replace("Step 3/", "Step 812/")
    keys = by_key(parse(nan_step, "nemo_rl"))
    assert keys["train/avg_reward"][0][0] == 812 and math.isnan(keys["train/avg_reward"][0][1])


# -- RLinf ---------------------------------------------------------------------------------------------------


def tqdm_number(value: float) -> str:
    """How tqdm's `format_num` writes a postfix number."""
    short = f"{value:.3g}".replace("+0", "+").replace("-0", "-")
    return short if len(short) < len(str(value)) else str(value)


def rlinf_bar(step: int, total: int, metrics: dict[str, float]) -> str:
    """A redraw of RLinf's `Global Step` tqdm bar, its carriage return first (tqdm on a file)."""
    percent = step * 100 // total
    postfix = ", ".join(f"{k}={tqdm_number(v)}" for k, v in metrics.items())
    bar = "█" * (percent // 10) + " " * (10 - percent // 10)
    return f"\rGlobal Step: {percent:3d}%|{bar}| {step}/{total} [01:23<10:12,  7.01s/it, {postfix}]"


def test_rlinf_progress_bar_redraws_on_one_line() -> None:
    text = "".join(
        rlinf_bar(step, 100, {"step_time": 7.01 + step, "rewards": 0.25 * step, "actor/lr": 1e-05})
        for step in (1, 2, 3)
    )
    text = "Global Step:   0%|          | 0/100 [00:00<?, ?it/s]" + text + "\n"
    keys = by_key(parse(text, "rlinf"))
    assert keys["rewards"] == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert keys["step_time"] == [(1, 8.01), (2, 9.01), (3, 10.0)]
    assert keys["actor/lr"] == [(1, 1e-05), (2, 1e-05), (3, 1e-05)]
    assert by_key(parse(text)) == keys


def test_rlinf_progress_bar_cut_at_its_width_keeps_what_is_whole() -> None:
    """tqdm cuts a line at its `ncols` (RLinf: 1650): a bar of many metrics loses its `]` and the end of
    its last item; that item is dropped (`score=0.1` of `score=0.125`), the others read."""
    line = rlinf_bar(4, 100, {"step_time": 7.5, "rewards": 0.5, "score": 0.125})
    cut = line[: line.index("score=") + len("score=0.1")]
    keys = by_key(parse(cut + "\n", "rlinf"))
    assert keys == {"step_time": [(4, 7.5)], "rewards": [(4, 0.5)]}


def rlinf_table(step: int, total: int, sections: dict[str, list[str]]) -> str:
    """What `print_metrics_table` prints for step index STEP (it shows `step + 1`): 120 columns, three
    cells a row (39, 39 and 38 wide), a cell too long for its width cut with `…`."""
    width = 120

    def fit(text: str, size: int) -> str:
        return text.ljust(size) if len(text) <= size else text[: size - 1] + "…"

    def title(name: str) -> str:
        pad = width - 2 - len(f" {name} ")
        return f"├{'─' * (pad // 2)} {name} {'─' * (pad - pad // 2)}┤"

    progress = (step + 1) / total * 100
    bar = "█" * int(40 * progress / 100) + "░" * (40 - int(40 * progress / 100))
    blank = f"│{' ' * (width - 2)}│"
    lines = [f"\n╭{'─' * (width - 2)}╮", title("Metric Table")]
    lines.append(
        fit(f"│ Global Step: {step + 1:4d}/{total} │ Progress: {bar} │ {progress:5.1f}%", width - 2) + " │"
    )
    lines.append(fit("│ Elapsed: 01:23 │ ETA: 10:12 │ Step Time: 6.917s", width - 2) + " │")
    for name, cells in sections.items():
        lines += [title(name), blank]
        for i in range(0, len(cells), 3):
            row = [*cells[i : i + 3], "", ""][:3]
            lines.append(f"│{fit(row[0], 39)}│{fit(row[1], 39)}│{fit(row[2], 38)}│")
        lines.append(blank)
    lines += [f"╰{'─' * (width - 2)}╯", ""]
    return "\n".join(lines) + "\n"


RLINF_TABLE = rlinf_table(
    11,
    100,
    {
        "Time": ["step=6.917", "rollout=3.210", "training=2.500"],
        "Rollout": ["rewards=0.500", "success_once=0.438", "a_metric_name_far_too_long_for_its_cell=0.5"],
        "Training/Actor": ["actor/grad_norm=1.25e-04", "actor/pg_loss=-0.0120"],
    },
)
"""Values made up, formatted as `print_metrics_table` formats them."""


def test_rlinf_metric_table() -> None:
    keys = by_key(parse(RLINF_TABLE, "rlinf"))
    assert keys == {
        "time/step": [(12, 6.917)],
        "time/rollout": [(12, 3.21)],
        "time/training": [(12, 2.5)],
        "rollout/rewards": [(12, 0.5)],
        "rollout/success_once": [(12, 0.438)],
        "train/actor/grad_norm": [(12, 0.000125)],
        "train/actor/pg_loss": [(12, -0.012)],
    }
    # The table's rows mean nothing once it is closed.
    assert parse(RLINF_TABLE + "│stray=1.0 │\n", "rlinf") == parse(RLINF_TABLE, "rlinf")


# -- the demo and generic lines ------------------------------------------------------------------------------


def demo_driver_line(step: int, reward: float, kl: float, throughput: float) -> str:
    """The demo driver's print (cockpit/demo/trainer.py, main)."""
    return f"step={step} reward={reward:.3f} kl={kl:.4f} throughput={throughput:.0f} tok/s"


def demo_actor_lines(step: int, value: float) -> list[str]:
    """Every print of the demo's actors (cockpit/demo/trainer.py), with Ray's prefix."""
    return [
        ray_prefix("RolloutWorker_0", 31001) + "RolloutWorker rank=0 up on node-1 gpu_ids=[0]",
        ray_prefix("RolloutWorker_0", 31001) + f"rollout rank=0 step={step} generated {int(value)} tokens",
        ray_prefix("RolloutWorker_0", 31001) + "rollout rank=0 waiting for the policy's weights…",
        ray_prefix("PolicyTrainer", 31002) + "PolicyTrainer up on node-2 gpu_ids=[1]",
        ray_prefix("PolicyTrainer", 31002) + f"policy update step={step} loss={value:.4f} version={step}",
        ray_prefix("ReferencePolicy", 31003) + f"reference step={step} kl={value:.4f}",
        ray_prefix("Critic", 31004) + f"critic step={step} value_loss={0.5 / (step + 1):.4f}",
        f"demo trainer: 3 nodes, 6 GPUs, {step} steps",
        "demo trainer: done",
    ]


def test_demo_driver_lines_and_not_its_actors() -> None:
    text = "\n".join(
        [
            demo_driver_line(1, 0.2013, 0.0211, 3406.4),
            *demo_actor_lines(1, 0.31),
            demo_driver_line(2, 0.25, 0.02, 3500),
            ray_prefix("PolicyTrainer", 31002)
            + "policy update step=2 loss=0.7071 version=2"
            + repeated(3, True),
        ]
    )
    for form in ("demo", "generic", "auto"):
        assert by_key(parse(text, form)) == {
            "reward": [(1, 0.201), (2, 0.25)],
            "kl": [(1, 0.0211), (2, 0.02)],
            "throughput": [(1, 3406.0), (2, 3500.0)],
        }, form


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("step: 7, loss: 0.5 | lr=1e-5", [(7, "loss", 0.5), (7, "lr", 1e-5)]),
        ("global_step=3 train/loss=2.25 reward=-1.5e-3", [(3, "train/loss", 2.25), (3, "reward", -0.0015)]),
        ("iteration: 10  loss: nan  grad_norm: inf", [(10, "loss", math.nan), (10, "grad_norm", math.inf)]),
        ("iter 10: loss 2.3", []),  # no separator: not this format
        ("epoch=2 acc=0.75; val_acc=0.5", [(2, "acc", 0.75), (2, "val_acc", 0.5)]),
        ("step=3.5 loss=1", []),  # a step is a whole number
        ("INFO step=3 loss=1", []),  # not at the start
        ("stepping=3 loss=1", []),
        ("step=3 note=fine loss=0.25 -inf=1", [(3, "loss", 0.25)]),
    ],
)
def test_generic_lines(line: str, expected: list[Sample]) -> None:
    got = parse(line + "\n", "generic")
    assert len(got) == len(expected)
    for (step, key, value), (want_step, want_key, want) in zip(got, expected, strict=True):
        assert (step, key) == (want_step, want_key)
        assert value == want or (math.isnan(value) and math.isnan(want))


def test_regex_format() -> None:
    form = parse_format(r"it (?P<step>\d+): loss (?P<loss>\S+), time (?P<ms>[\d.]+)ms")
    text = "it 100: loss 2.3456, time 12.5ms\nit 200: loss nan, time 13ms\nsomething else\n"
    keys = by_key(parse(text, form))  # type: ignore[arg-type]
    assert keys["ms"] == [(100, 12.5), (200, 13.0)]
    assert keys["loss"][0] == (100, 2.3456) and math.isnan(keys["loss"][1][1])


# -- values, prefixes, suffixes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.5", 0.5),
        ("-1e-05", -1e-05),
        ("1E+3", 1000.0),
        (".5", 0.5),
        ("nan", math.nan),
        ("NaN", math.nan),
        ("inf", math.inf),
        ("-inf", -math.inf),
        ("np.float64(0.25)", 0.25),
        ("np.float32(nan)", math.nan),
        ("np.int64(7)", 7.0),
        ("tensor(0.5)", 0.5),
        ("tensor(0.5, device='cuda:0')", 0.5),
        ("True", None),
        ("abc", None),
        ("1_000", None),
        ("١٢٣", None),  # Arabic-Indic digits: float() reads them, no logger prints them
        ("np.float64(0.5", None),
        ("os.system(1)", None),
        ("9" * 65, None),
    ],
)
def test_values(text: str, value: float | None) -> None:
    got = number(text)
    if value is None or got is None:
        assert got is value
    else:
        assert got == value or (math.isnan(got) and math.isnan(value))


def test_ansi_prefixes_and_repeated_suffixes_are_removed() -> None:
    lines = [
        ray_prefix("TaskRunner", 7) + verl_line(1, {"critic/score/mean": "0.5"}),
        f"{CYAN}(TaskRunner pid=7, ip=10.0.0.3){RESET} " + verl_line(2, {"critic/score/mean": "0.6"}),
        "(raylet, ip=10.0.0.3) " + verl_line(3, {"critic/score/mean": "0.7"}) + repeated(4, True),
        f"\x1b[1m{verl_line(4, {'critic/score/mean': '0.8'})}\x1b[0m" + repeated(2),
        verl_line(5, {"critic/score/mean": f"{GREEN}0.9{RESET}"}),
    ]
    keys = by_key(parse("\n".join(lines) + "\n"))
    assert keys == {"critic/score/mean": [(1, 0.5), (2, 0.6), (3, 0.7), (4, 0.8), (5, 0.9)]}


def test_nan_and_inf_raise_the_alarm_with_their_step() -> None:
    store = SeriesStore()
    parser = MetricsParser("demo")
    for step, reward in enumerate(["0.5", "0.6", "nan", "0.7", "inf"], 810):
        store.extend(parser.feed(f"step={step} reward={reward} kl=0.01\n"))
    alarms = store.nonfinite()
    assert [(a.key, a.step, a.latest_step, a.count, a.now) for a in alarms] == [("reward", 812, 814, 2, True)]
    assert math.isnan(alarms[0].value)
    assert alarms[0].line == "reward went nan at step 812"
    store.extend(parser.feed("step=815 reward=0.8 kl=-inf\n"))
    alarms = store.nonfinite()
    assert [(a.key, a.step, a.now) for a in alarms] == [("reward", 812, False), ("kl", 815, True)]
    assert alarms[0].line == "reward went nan at step 812 (finite again since)"
    summary = store["reward"].summary()
    assert (summary.minimum, summary.maximum, summary.count) == (0.5, 0.8, 6)


# -- garbage and hostile lines -------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400), st.sampled_from(FORMATS))
def test_any_text_never_raises(text: str, form: str) -> None:
    parser = MetricsParser(form)
    samples = parser.feed(text) + parser.feed(text.encode("utf-8", "surrogatepass")[:50]) + parser.flush()
    for step, key, value in samples:
        assert isinstance(step, int) and 0 <= step < 10**18
        assert 0 < len(key) <= MAX_KEY_CHARS and key.isprintable()
        assert isinstance(value, float)


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_never_raise(data: bytes) -> None:
    parser = MetricsParser()
    parser.feed(data)
    parser.feed(b"step=1 x=" + data + b"\nstep:2 - " + data + b"\n")
    parser.flush()


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(FORMATS))
def test_no_key_from_the_demo_actors_prints(step: int, value: float, form: str) -> None:
    finite = value if math.isfinite(value) else 0.0
    lines = demo_actor_lines(step, min(abs(finite), 1e12))
    text = "\n".join(line + (repeated(3) if i % 2 else "") for i, line in enumerate(lines)) + "\n"
    assert parse(text, form) == []


def test_hostile_lines_cost_linear_time_and_are_skipped() -> None:
    # Each would take quadratic time (or forever) with an unbounded regex; all are plain garbage.
    hostile = [
        "step=1 " + "a" * 200_000,
        "step=1 " + "k" * 200 + "=" + "9" * 200,
        "step=1" + " " * 200_000 + "[repeated 2x across cluster]",
        "Global Step" * 20_000,
        "Global Step:  1%|" + "█" * 100_000 + "| 1/2 [",
        "(" * 100_000 + "pid=1) step=1 x=1",
        "\x1b]" * 50_000 + "step=1 x=1",
        "step:" + "9" * 10_000 + " - a:1",
        "step:1 - " + "a:1 - " * 30_000,
        "═" * 50 + " Step 1/2 " + "=" * 100_000,
        "│" + "x=1│" * 30_000,
    ]
    parser = MetricsParser()
    samples = parser.feed("\n".join(hostile) + "\n")
    # What is left is garbage but two lines: `step:1 - a:1 - ...` is verl's format, and the escapes
    # before `step=1 x=1` are 50,000 two-byte ANSI escapes (`ESC ]`), removed. `(((...pid=1)` is no prefix.
    assert {key for _, key, _ in samples} == {"a", "x"}


def test_long_lines_are_skipped_in_one_piece_or_in_many() -> None:
    long_line = "step=1 x=" + "1" * (MAX_LINE_CHARS + 10)
    text = f"step=0 x=1\n{long_line}\nstep=2 x=2\n"
    whole = parse(text, "demo")
    assert whole == [(0, "x", 1.0), (2, "x", 2.0)]
    parser = MetricsParser("demo")
    pieces = [text[i : i + 4096] for i in range(0, len(text), 4096)]
    assert [s for piece in pieces for s in parser.feed(piece)] + parser.flush() == whole


# -- chunks --------------------------------------------------------------------------------------------------


MIXED_LOG = "\n".join(
    [
        "2026-11-26 01:02:03,123 INFO worker.py:1821 -- Connected to Ray cluster.",
        ray_prefix("TaskRunner", 9) + verl_line(1, {"actor/pg_loss": "np.float64(-0.5)", "x": "1"}),
        *demo_actor_lines(1, 0.5),
        demo_driver_line(1, 0.2, 0.02, 3000),
        NEMO_STEP,
        rlinf_bar(4, 10, {"rewards": 0.5}) + rlinf_bar(5, 10, {"rewards": 0.625}),
        RLINF_TABLE,
        "step: 9, loss: 0.5 | lr=1e-5\r\nstep=10 reward=nan kl=inf throughput=1 tok/s",
        "ünïcödé • │ ├ ╰ \x1b[31mred\x1b[0m",
    ]
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.integers(0, len(MIXED_LOG.encode())), max_size=30), st.sampled_from(FORMATS))
def test_any_cutting_gives_what_the_whole_text_gives(cuts: list[int], form: str) -> None:
    data = MIXED_LOG.encode()
    whole = parse(MIXED_LOG, form)
    parser = MetricsParser(form)
    got: list[Sample] = []
    bounds = [0, *sorted(cuts), len(data)]
    for start, end in itertools.pairwise(bounds):
        got += parser.feed(data[start:end])  # bytes cut anywhere, UTF-8 characters included
    got += parser.flush()
    assert repr(got) == repr(whole)  # repr: nan == nan


@pytest.mark.parametrize("form", FORMATS)
def test_feeding_lines_gives_what_feeding_the_text_gives(form: str) -> None:
    parser = MetricsParser(form)
    lines = MIXED_LOG.split("\n")
    assert repr(parser.feed_lines(lines)) == repr(parse(MIXED_LOG, form))


def test_the_mixed_log_holds_each_format() -> None:
    keys = by_key(parse(MIXED_LOG))
    assert keys["actor/pg_loss"] == [(1, -0.5)]
    assert keys["reward"][0] == (1, 0.2) and math.isnan(keys["reward"][1][1])
    assert keys["train/avg_reward"] == [(3, 0.4567)]
    assert keys["rewards"] == [(4, 0.5), (5, 0.625)]
    assert keys["rollout/rewards"] == [(12, 0.5)]
    assert keys["lr"] == [(9, 1e-5)]


def test_lines_without_a_format_word_are_never_looked_at() -> None:
    noise = [
        f"2026-11-26 01:02:{i % 60:02d},123 INFO rollout.py:212 -- generated {i} tokens" for i in range(1000)
    ]
    text = "\n".join([*noise, demo_driver_line(1, 0.5, 0.01, 100), *noise]) + "\n"
    for form in ("auto", "demo", "verl", "generic", "nemo_rl", "rlinf"):
        parser = MetricsParser(form)
        parser.feed(text)
        assert parser.looked_at == (1 if form in ("auto", "demo", "generic") else 0), form
    regex = MetricsParser(parse_format(r"step=(?P<step>\d+) reward=(?P<reward>\S+)"))
    assert len(regex.feed(text)) == 1 and regex.looked_at == 2001


# -- the store -----------------------------------------------------------------------------------------------


def test_series_thins_evenly_and_keeps_the_newest_point() -> None:
    series = Series("reward", max_points=8)
    for step in range(1, 101):
        series.add(step, float(step))
    points = series.points()
    assert len(points) <= 9 and points[-1] == (100, 100.0)
    steps = [s for s, _ in points[:-1]]
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    assert gaps == {series.stride} and series.stride == 16 and steps[0] == 1
    summary = series.summary()
    assert (summary.count, summary.first, summary.last, summary.minimum, summary.maximum) == (
        100,
        1.0,
        100.0,
        1.0,
        100.0,
    )


def test_same_step_replaces_and_an_earlier_step_resumes() -> None:
    series = Series("loss")
    for step in (1, 2, 3, 3, 4, 5):
        series.add(step, step * 10.0 + (0.5 if step == 3 and series.last_step == 3 else 0))
    assert series.points() == [(1, 10.0), (2, 20.0), (3, 30.5), (4, 40.0), (5, 50.0)]
    series.add(3, -1.0)  # resumed from the checkpoint of step 2
    series.add(4, -2.0)
    assert series.points() == [(1, 10.0), (2, 20.0), (3, -1.0), (4, -2.0)]
    assert series.last_step == 4 and series.count == 8


def test_store_caps_keys_and_filters() -> None:
    store = SeriesStore(max_keys=3)
    kept = store.extend([(1, f"k{i}", 1.0) for i in range(5)] + [(2, "k0", 2.0)])
    assert store.keys() == ["k0", "k1", "k2"] and store.refused == 2 and len(kept) == 4
    wanted = SeriesStore(keys=KeyFilter(["critic/score/*", "kl"]))
    wanted.extend(
        [(1, "critic/score/mean", 1.0), (1, "critic/vf_loss", 2.0), (1, "kl", 3.0), (1, "klx", 4.0)]
    )
    assert wanted.keys() == ["critic/score/mean", "kl"]


def test_keys_too_long_or_unprintable_are_skipped() -> None:
    long_key = "a" * (MAX_KEY_CHARS + 1)
    line = verl_line(1, {long_key: "1", "ok": "2", "bad\u202ekey": "3", "a" * MAX_KEY_CHARS: "4"})
    assert [key for _, key, _ in parse(line + "\n", "verl")] == ["ok", "a" * MAX_KEY_CHARS]


def test_rows_merge_the_series_by_step() -> None:
    store = SeriesStore()
    store.extend([(1, "a", 1.0), (1, "b", 10.0), (2, "a", 2.0), (3, "b", 30.0), (3, "a", math.nan)])
    rows = list(store.rows(["b", "a", "missing"]))
    assert repr(rows) == repr([(1, {"b": 10.0, "a": 1.0}), (2, {"a": 2.0}), (3, {"b": 30.0, "a": math.nan})])


def test_step_rows_give_out_a_row_per_step() -> None:
    rows = StepRows()
    assert rows.add([(1, "a", 1.0), (1, "b", 2.0)]) == []
    assert rows.add([(2, "a", 3.0)]) == [(1, {"a": 1.0, "b": 2.0})]
    assert rows.flush() == [(2, {"a": 3.0})] and rows.flush() == []


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.512, "0.512"), (3406.0, "3406"), (1e-06, "1e-06"), (-0.0, "0"), (1e20, "1e+20"), (math.inf, "inf")],
)
def test_format_value_reads_back(value: float, text: str) -> None:
    assert format_value(value) == text and float(text) == value
    assert format_value(math.nan) == "nan"


# -- formats in profiles -------------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("entrypoint: x\n", "auto"),
        ("entrypoint: x\nframework: verl\n", "verl"),
        ("entrypoint: x\nframework: intuitor\n", "verl"),
        ("entrypoint: x\nframework: nemo_rl\n", "nemo_rl"),
        ("entrypoint: x\nframework: rlinf\nmetrics: generic\n", "generic"),
        ("entrypoint: x\nmetrics: 'it (?P<step>\\d+): loss (?P<loss>\\S+)'\n", "regex"),
    ],
)
def test_profile_metrics_format(tmp_path: Path, text: str, expected: str) -> None:
    profile = profiles.load(write(tmp_path, text))
    form = profile_format(profile.metrics, profile.framework)
    assert (form if isinstance(form, str) else "regex") == expected
    if expected == "regex":
        assert isinstance(form, re.Pattern) and form.groupindex.keys() == {"step", "loss"}


def test_the_shipped_demo_profiles_name_the_demo_format() -> None:
    for name in ("demo", "demo-crash", "demo-hang"):
        profile = profiles.load(profiles.find(name))
        assert profile_format(profile.metrics, profile.framework) == "demo", name
