"""Provides step anatomy: each step's time split into the phases the framework timed (generation, log-probs,
update, weight sync, checkpoint ...), the share of each phase over the last steps, and the checkpoint saves.

Read from the timing keys the frameworks already print (`lines.MetricsParser` turns them into samples);
nothing is measured here. Where each key comes from:

- verl (volcengine/verl@b178a3cd56f58b2d502255daba591e92833930a7): `verl/trainer/ppo/ray_trainer.py`
  times each part of a step with `marked_timer(name, timing_raw)` inside `marked_timer("step", ...)`:
  `gen`, `gen_max`, `reward`, `old_log_prob`, `ref` (`str(Role.RefPolicy)`, verl/trainer/ppo/utils.py),
  `values`, `adv`, `update_critic`, `update_actor`, `update_weights`, `testing`, `save_checkpoint`;
  `start_profile`/`stop_profile` run outside the step. `verl/trainer/ppo/metric_utils.py`
  `compute_timing_metrics` logs them as `timing_s/{name}` (and `timing_per_token_ms/{name}`, not a
  duration of the step). The step's total is `timing_s/step`; the checkpoint is `timing_s/save_checkpoint`.
- NeMo RL (NVIDIA-NeMo/RL@7ea279abfbeb698b092856d0dab61e7cf39bc909): `nemo_rl/algorithms/grpo.py` times
  the step with `timer.time("total_step_time")` around `data_processing`, `prepare_for_generation/total`
  (with `prepare_for_generation/transfer_and_update_weights` inside it), `generation`,
  `reward_calculation`, `logprob_inference_prep`, `policy_and_reference_logprobs`,
  `advantage_calculation`, `training_prep`, `policy_training`, `checkpointing` ..., and prints them under
  `⏱️  Timing:` as `  • Total step time: 61.73s` then `  • {name}: {v:.2f}s ({percent:.1f}%)`. The parser
  makes `timing/<slug>` keys (`/` becomes `_`), so the total is `timing/total_step_time`, the checkpoint
  `timing/checkpointing`, and a timer inside a `<group>/total` one (`timing/prepare_for_generation_...`
  beside `timing/prepare_for_generation_total`) is not counted twice.
- RLinf (RLinf/RLinf@a3816b596478dcd8a5c69a6ec1468c9519f77b5b): `rlinf/runners/embodied_runner.py` and
  `reasoning_runner.py` time `self.timer("step")` around `sync_weights`, `prepare_data`,
  `generate_rollouts`, `cal_adv_and_returns`, `actor_training` ... and log `time/{name}`; the workers'
  own timers come as `time/actor/...`, `time/rollout/...`, `time/env/...` (inside those phases, not
  counted). The metric table's `Time` section gives `time/<name>` keys; the total is `time/step`. RLinf
  does not time its checkpoint saves.
- Older verl logged `timing/{name}` (its published console log, `docs/start/quickstart.rst` line 116):
  read as verl unless NeMo RL's `timing/total_step_time` is there.

A profile can name its own keys (`PhaseKeys`: a prefix, a total, a checkpoint).

What a step shows: each phase's seconds exactly as printed, the total (the framework's own total where it
prints one, else the sum of the phases), and `other` = total - sum of phases when that is positive. When
the phases add up to more than the total (RLinf's reasoning runner times its workers side by side), no
`other` is shown and shares are of the summed phases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cockpit.core.metrics.series import SeriesStore

OTHER = "other"
"""The name of the part of a step no phase timer covers."""


@dataclass(frozen=True)
class PhaseKeys:
    """Where a framework's phase timings are: keys under PREFIX; TOTAL and CHECKPOINT are names under it."""

    framework: str
    prefix: str
    total: str | None
    checkpoint: str | None = None
    outside: frozenset[str] = frozenset()
    """Names timed outside the step (never phases)."""
    nested_under_slash: bool = True
    """Whether a name with a `/` is a timer inside another phase (not counted)."""
    group_total_suffix: str | None = None
    """NeMo RL: `<group>_total` holds the timers named `<group>_...` (not counted)."""
    suffix: str = ""
    """After each name, as before it PREFIX: RLinf's progress bar has `rollout_time`, not `time/rollout`."""

    def key(self, name: str) -> str:
        return self.prefix + name + self.suffix

    def name(self, key: str) -> str | None:
        """The timer's name in KEY, or None when KEY is not one of this framework's timings."""
        inside = len(key) - len(self.prefix) - len(self.suffix)
        if inside <= 0 or not key.startswith(self.prefix) or not key.endswith(self.suffix):
            return None
        return key[len(self.prefix) : len(key) - len(self.suffix)]

    @property
    def pattern(self) -> str:
        """What its keys look like: `timing_s/*`, `*_time`."""
        return f"{self.prefix}*{self.suffix}"


VERL = PhaseKeys(
    "verl", "timing_s/", "step", "save_checkpoint", outside=frozenset({"start_profile", "stop_profile"})
)
VERL_OLD = PhaseKeys("verl", "timing/", "step", "save_checkpoint", outside=VERL.outside)
"""verl before `timing_s/`: its published console log (docs/start/quickstart.rst l. 116) has `timing/gen`."""
NEMO_RL = PhaseKeys("nemo_rl", "timing/", "total_step_time", "checkpointing", group_total_suffix="_total")
RLINF = PhaseKeys("rlinf", "time/", "step", None)
RLINF_BAR = PhaseKeys("rlinf", "", "step", None, suffix="_time")
"""RLinf's reasoning runner: its `time/*` go to TensorBoard and W&B only; on the console the same timers
are in the progress bar's postfix as `<name>_time` (rlinf/runners/reasoning_runner.py,
`logging_metrics = {f"{k}_time": v ...}`), the step's own as `step_time`."""
KNOWN = (VERL, NEMO_RL, VERL_OLD, RLINF, RLINF_BAR)
"""In the order `detect` tries them: a total key first (NeMo RL always prints its total), then a prefix
(not for RLinf's bar: a name ending in `_time` says too little without its `step_time`)."""


@dataclass(frozen=True)
class StepPhases:
    """One step's time, split."""

    step: int
    phases: tuple[tuple[str, float], ...]
    """(name, seconds as printed), the framework's order of names (sorted by name)."""
    total: float
    total_printed: bool
    """Whether TOTAL is the framework's own total, not the sum of the phases."""
    other: float
    """total - sum of phases when positive, else 0."""

    def seconds(self) -> dict[str, float]:
        """Each phase's seconds, `other` last when there is some."""
        out = dict(self.phases)
        if self.other > 0:
            out[OTHER] = self.other
        return out


@dataclass(frozen=True)
class PhaseShare:
    name: str
    seconds: float
    share: float
    """Of the summed step totals over the window, 0..1."""


@dataclass(frozen=True)
class Checkpoints:
    """The checkpoint saves seen."""

    count: int
    last_step: int
    last_seconds: float
    mean_seconds: float
    share: float
    """Of the summed step totals over the window, 0..1."""
    steps_since: int
    """Steps logged after the last save."""
    seconds_since: float
    """Summed step totals of those steps."""


@dataclass(frozen=True)
class Anatomy:
    keys: PhaseKeys
    steps: tuple[StepPhases, ...]
    shares: tuple[PhaseShare, ...]
    """Over the last `window` steps, biggest first."""
    window: int
    checkpoints: Checkpoints | None

    @property
    def names(self) -> list[str]:
        """Every phase seen, in the order of the shares (biggest first)."""
        return [s.name for s in self.shares]


def profile_keys(phases: Mapping[str, str], framework: str = "") -> PhaseKeys | None:
    """A profile's `phases:` (prefix, total, checkpoint) as PhaseKeys; None when it names no prefix."""
    prefix = phases.get("prefix", "")
    if not prefix:
        return None
    return PhaseKeys(
        framework or "profile", prefix, phases.get("total") or None, phases.get("checkpoint") or None
    )


def detect(keys: Iterable[str]) -> PhaseKeys | None:
    """The framework whose total key is among KEYS (else one whose prefix is), or None."""
    present = set(keys)
    for scheme in KNOWN:
        if scheme.total is not None and scheme.key(scheme.total) in present:
            return scheme
    for scheme in KNOWN:
        if scheme is NEMO_RL or not scheme.prefix:  # NeMo RL always prints its total: `timing/` alone
            continue  # is older verl
        if any(k.startswith(scheme.prefix) for k in present):
            return scheme
    return None


def phase_names(keys: PhaseKeys, names: Iterable[str]) -> list[str]:
    """The names (under the prefix) that are phases of a step."""
    names = list(names)
    groups = (
        [n[: -len(keys.group_total_suffix)] + "_" for n in names if n.endswith(keys.group_total_suffix)]
        if keys.group_total_suffix
        else []
    )
    out = []
    for name in names:
        if name == keys.total or name in keys.outside:
            continue
        if keys.nested_under_slash and "/" in name:
            continue
        inside_group = any(name.startswith(g) for g in groups)
        if inside_group and keys.group_total_suffix and not name.endswith(keys.group_total_suffix):
            continue
        out.append(name)
    return sorted(out)


def step_table(store: SeriesStore, keys: PhaseKeys) -> dict[int, dict[str, float]]:
    """step -> {name under the prefix: seconds} for every key under the prefix (non-finite ones dropped)."""
    table: dict[int, dict[str, float]] = {}
    stored: list[str] = store.keys()
    for key in stored:
        name = keys.name(key)
        if name is None:
            continue
        for step, value in store[key].points():
            if value == value and abs(value) != float("inf"):
                table.setdefault(step, {})[name] = value
    return table


def split(step: int, timings: Mapping[str, float], keys: PhaseKeys) -> StepPhases:
    """One step's timings (names under the prefix) split into phases, total and other."""
    names = phase_names(keys, timings)
    phases = tuple((n, timings[n]) for n in names)
    summed = sum(v for _, v in phases)
    printed = keys.total is not None and keys.total in timings
    total = timings[keys.total] if printed and keys.total is not None else summed
    other = total - summed if printed and total > summed else 0.0
    return StepPhases(step, phases, max(total, summed), printed, other)


def anatomy(store: SeriesStore, keys: PhaseKeys | None = None, last: int = 20) -> Anatomy | None:
    """Every step's phases, the shares over the last LAST steps and the checkpoint saves; None when the
    store holds no timing keys of a known framework (or of KEYS)."""
    keys = keys or detect(store.keys())
    if keys is None:
        return None
    table = step_table(store, keys)
    steps = tuple(split(step, table[step], keys) for step in sorted(table))
    steps = tuple(s for s in steps if s.phases or s.total_printed)
    if not steps:
        return None
    window = steps[-last:] if last > 0 else steps
    whole = sum(s.total for s in window)
    sums: dict[str, float] = {}
    for s in window:
        for name, seconds in s.seconds().items():
            sums[name] = sums.get(name, 0.0) + seconds
    shares = tuple(
        PhaseShare(name, sec, sec / whole if whole > 0 else 0.0)
        for name, sec in sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return Anatomy(keys, steps, shares, len(window), _checkpoints(keys, table, steps, window, whole))


def _checkpoints(
    keys: PhaseKeys,
    table: Mapping[int, Mapping[str, float]],
    steps: tuple[StepPhases, ...],
    window: tuple[StepPhases, ...],
    whole: float,
) -> Checkpoints | None:
    if keys.checkpoint is None:
        return None
    saves = [(step, row[keys.checkpoint]) for step, row in sorted(table.items()) if keys.checkpoint in row]
    if not saves:
        return None
    last_step, last_seconds = saves[-1]
    in_window = {s.step for s in window}
    after = [s for s in steps if s.step > last_step]
    return Checkpoints(
        count=len(saves),
        last_step=last_step,
        last_seconds=last_seconds,
        mean_seconds=sum(v for _, v in saves) / len(saves),
        share=sum(v for step, v in saves if step in in_window) / whole if whole > 0 else 0.0,
        steps_since=len(after),
        seconds_since=sum(s.total for s in after),
    )
