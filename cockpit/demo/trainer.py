"""Provides a small RL-style trainer that behaves like a verl / NeMo RL job on a Ray cluster.

Named actors by role, spread over the nodes and holding (logical) GPU resources, the way a PPO or GRPO
run lays out its worker groups: 4 RolloutWorkers, a PolicyTrainer, a ReferencePolicy, a Critic and a
RewardModel. The driver runs a step loop and prints `step=N reward=... kl=... throughput=...`; each
actor prints to its own log. Everything sleeps most of the time: the demo must stay light on a shared
2-core login node.

Run as a Ray job entrypoint: `python -m cockpit.demo.trainer --steps 120`.
Environment knobs (set by the profiles): DEMO_STEPS, DEMO_STEP_SECONDS, DEMO_CRASH_AT_STEP,
DEMO_HANG_AT_STEP (the `demo-hang` profile: at that step RolloutWorker_0 blocks in
`wait_for_weights_sync` for good while the other RolloutWorkers wait for it in `all_gather_weights`, and
the driver waits for them: the hang the run doctor is for), DEMO_ROLLOUT_WORKERS (4 by default; each
actor is a Python process of its own, about 2 s of CPU to start, so `rollout_workers=1` is a lighter run
of the same roles).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import socket
import sys
import time
from typing import Any

import ray


def wait_for_weights_sync() -> None:
    """Rank 0's hang: it waits for a weight broadcast that never comes (a lost NCCL peer, in real life)."""
    print("rollout rank=0 waiting for the policy's weights…", flush=True)
    while True:
        time.sleep(3600)


@ray.remote(num_cpus=0)
class WeightsBarrier:
    """Where the rollout ranks meet after a weight update (a collective, in a real run): nobody passes
    until all have arrived."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.arrived: set[int] = set()
        self.all_here = asyncio.Event()

    async def arrive(self, rank: int) -> None:
        self.arrived.add(rank)
        if len(self.arrived) >= self.ranks:
            self.all_here.set()
        await self.all_here.wait()


def all_gather_weights(barrier: Any, rank: int) -> None:
    """The other ranks' side of the hang: blocked in the collective, waiting for rank 0."""
    ray.get(barrier.arrive.remote(rank))


@ray.remote(num_cpus=0)
class RolloutWorker:
    """Generates responses for a shard of prompts (vLLM's role in verl)."""

    def __init__(self, rank: int, crash_at_step: int, hang_at_step: int = 0, barrier: Any = None) -> None:
        self.rank = rank
        self.crash_at_step = crash_at_step
        self.hang_at_step = hang_at_step
        self.barrier = barrier
        print(
            f"RolloutWorker rank={rank} up on {socket.gethostname()} gpu_ids={ray.get_gpu_ids()}", flush=True
        )

    def generate(self, step: int, prompts: int) -> dict[str, float]:
        time.sleep(0.05 + random.random() * 0.05)
        if self.crash_at_step and step == self.crash_at_step and self.rank == 0:
            # The failure the post-mortem debugger is for: a bad sample deep inside generation.
            raise RuntimeError(f"rollout rank {self.rank}: NaN in logits at step {step} (demo crash)")
        if self.hang_at_step and step == self.hang_at_step:
            if self.rank == 0:
                wait_for_weights_sync()
            all_gather_weights(self.barrier, self.rank)
        tokens = prompts * random.randint(180, 260)
        if step % 10 == 0:
            print(f"rollout rank={self.rank} step={step} generated {tokens} tokens", flush=True)
        return {"tokens": float(tokens), "reward": random.gauss(0.2 + 0.5 * (1 - math.exp(-step / 40)), 0.05)}


@ray.remote(num_cpus=0)
class PolicyTrainer:
    """Updates the actor policy (FSDP / Megatron's role)."""

    def __init__(self) -> None:
        self.version = 0
        print(f"PolicyTrainer up on {socket.gethostname()} gpu_ids={ray.get_gpu_ids()}", flush=True)

    def update(self, step: int, batch: list[dict[str, float]]) -> dict[str, float]:
        time.sleep(0.1)
        self.version += 1
        loss = 1.0 / math.sqrt(step + 1) + random.random() * 0.01
        print(f"policy update step={step} loss={loss:.4f} version={self.version}", flush=True)
        return {"loss": loss}


@ray.remote(num_cpus=0)
class ReferencePolicy:
    """Computes reference log-probs for the KL penalty."""

    def log_probs(self, step: int) -> float:
        time.sleep(0.02)
        kl = 0.02 + 0.01 * math.sin(step / 7) + random.random() * 0.002
        if step % 10 == 0:
            print(f"reference step={step} kl={kl:.4f}", flush=True)
        return kl


@ray.remote(num_cpus=0)
class Critic:
    """Estimates values for advantage computation (PPO)."""

    def values(self, step: int) -> float:
        time.sleep(0.02)
        if step % 10 == 0:
            print(f"critic step={step} value_loss={0.5 / (step + 1):.4f}", flush=True)
        return random.random()


@ray.remote(num_cpus=0)
class RewardModel:
    """Scores rollouts (a reward model or a rule-based verifier)."""

    def score(self, step: int, n: int) -> float:
        time.sleep(0.02)
        return random.random()


def _spawn(cls: Any, name: str, gpus: float, *args: Any) -> Any:
    return cls.options(name=name, num_gpus=gpus, scheduling_strategy="SPREAD").remote(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=int(os.environ.get("DEMO_STEPS", "200")))
    parser.add_argument(
        "--step-seconds", type=float, default=float(os.environ.get("DEMO_STEP_SECONDS", "1.0"))
    )
    parser.add_argument("--crash-at-step", type=int, default=int(os.environ.get("DEMO_CRASH_AT_STEP", "0")))
    parser.add_argument("--hang-at-step", type=int, default=int(os.environ.get("DEMO_HANG_AT_STEP", "0")))
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument(
        "--rollout-workers", type=int, default=int(os.environ.get("DEMO_ROLLOUT_WORKERS", "4"))
    )
    # Hydra-style `steps=3` overrides (what `cockpit submit ... KEY=VALUE` appends) work like --steps=3.
    argv = [f"--{a.replace('_', '-')}" if "=" in a and not a.startswith("-") else a for a in sys.argv[1:]]
    args = parser.parse_args(argv)
    if args.rollout_workers < 1:
        parser.error("--rollout-workers: at least 1")

    ray.init()
    gpus = ray.available_resources().get("GPU", 0.0)
    # PolicyTrainer takes a whole GPU and is placed first; the other seven share half GPUs, so the
    # 4.5 GPUs fit a 3 x 2 cluster in any packing order (more RolloutWorkers ask for more). Without
    # free GPUs (another job holds them) the roles still run, without GPU resources, rather than
    # waiting forever.
    needed = max(4.5, 1.0 + 0.5 * (args.rollout_workers + 3))
    trainer_gpu, shared_gpu = (1.0, 0.5) if gpus >= needed else (0.0, 0.0)
    print(f"demo trainer: {len(ray.nodes())} nodes, {gpus:g} GPUs, {args.steps} steps", flush=True)
    trainer = _spawn(PolicyTrainer, "PolicyTrainer", trainer_gpu)
    barrier_class: Any = WeightsBarrier
    barrier = barrier_class.remote(args.rollout_workers) if args.hang_at_step else None
    rollouts = [
        _spawn(
            RolloutWorker, f"RolloutWorker_{i}", shared_gpu, i, args.crash_at_step, args.hang_at_step, barrier
        )
        for i in range(args.rollout_workers)
    ]
    reference = _spawn(ReferencePolicy, "ReferencePolicy", shared_gpu)
    critic = _spawn(Critic, "Critic", shared_gpu)
    reward_model = _spawn(RewardModel, "RewardModel", shared_gpu)

    for step in range(1, args.steps + 1):
        started = time.monotonic()
        shards = ray.get(
            [w.generate.remote(step, max(1, args.prompts // args.rollout_workers)) for w in rollouts]
        )
        kl, _value, _score = ray.get(
            [
                reference.log_probs.remote(step),
                critic.values.remote(step),
                reward_model.score.remote(step, 64),
            ]
        )
        ray.get(trainer.update.remote(step, shards))
        elapsed = time.monotonic() - started
        tokens = sum(s["tokens"] for s in shards)
        reward = sum(s["reward"] for s in shards) / len(shards)
        print(
            f"step={step} reward={reward:.3f} kl={kl:.4f} throughput={tokens / max(elapsed, 1e-3):.0f} tok/s",
            flush=True,
        )
        time.sleep(max(0.0, args.step_seconds - elapsed))
    print("demo trainer: done", flush=True)


if __name__ == "__main__":
    main()
