"""Provides a synthetic cluster for the GPU view: N nodes x G GPUs of seeded, reproducible readings.

Used by the heatmap snapshot test and the GPU-view benchmark, where a real 1,024-node cluster is out of
reach. Every kind of GPU row the view handles appears: busy, idle, NA utilization (NVML's -1), AMD
entries without temperature, logical-only nodes, stale readings and dead nodes.
"""

from __future__ import annotations

import random

from cockpit.core.snapshots import NA, ActorRow, GpuProcess, GpuSample, Metric, NodeSnapshot

T0 = 1_795_642_346.0
"""A fixed cluster clock, so rendered ages are the same on every run."""


def synthetic_nodes(
    nodes: int = 1024, gpus: int = 8, seed: int = 7, step: int = 0, now: float = T0
) -> tuple[NodeSnapshot, ...]:
    """`nodes` x `gpus` readings; `step` moves every utilization along its own random walk."""
    rng = random.Random(seed)
    out = []
    for n in range(nodes):
        node_id = f"{n:04x}" + f"{rng.getrandbits(208):052x}"
        kind = rng.random()
        dead = n % 97 == 13
        logical = n % 64 == 5
        amd = n % 8 == 3
        stale = n % 50 == 7
        busy = rng.uniform(20, 100)
        samples = []
        if not logical:
            for g in range(gpus):
                walk = random.Random(seed * 1_000_003 + n * 31 + g).uniform(-15, 15) * ((step % 7) - 3) / 3
                util: Metric = max(0.0, min(100.0, busy + walk + rng.uniform(-10, 10)))
                if n % 11 == 4 and g % 3 == 0:
                    util = 0.0  # idle GPUs while the job runs
                if n % 131 == 9 and g == 2:
                    util = NA  # NVML utilization failed (-1)
                total = 196_608.0 if amd else 81_559.0
                samples.append(
                    GpuSample(
                        index=g,
                        name="AMD Instinct MI300X" if amd else "NVIDIA H100 80GB HBM3",
                        uuid=f"GPU-{n:04d}-{g}",
                        utilization=util,
                        memory_used_mib=round(total * rng.uniform(0.05, 0.95)),
                        memory_total_mib=total,
                        power_w=round(rng.uniform(90, 700), 1),
                        temperature_c=NA if amd else float(rng.randint(30, 85)),
                        processes=(GpuProcess(pid=10_000 + n * 16 + g, memory_mib=4096.0, utilization=NA),),
                    )
                )
        out.append(
            NodeSnapshot(
                node_id=node_id,
                ip=f"10.{n // 250}.{n % 250}.{10 + int(kind * 10)}",
                hostname=f"gpu-{n:04d}",
                is_head=n == 0,
                state="DEAD" if dead else "ALIVE",
                state_message="Unexpected termination: health check failed due to missing too many heartbeats"
                if dead
                else "",
                start_time=now - 3600 + n,
                end_time=now - 120 if dead else None,
                logical_cpus=96.0,
                logical_gpus=float(gpus),
                resources_total={"CPU": 96.0, "GPU": float(gpus)},
                cpu_percent=rng.uniform(5, 90),
                gpus=tuple(samples),
                sample_time=now - (45.0 if stale else rng.uniform(0.5, 5.0)),
            )
        )
    return tuple(out)


def synthetic_actors(nodes: tuple[NodeSnapshot, ...]) -> list[ActorRow]:
    """One actor per physical GPU, named like a verl run: rollout on even GPUs, policy on odd ones."""
    actors = []
    for node in nodes:
        for gpu in node.gpus:
            rank = len(actors)
            cls = "vLLMRollout" if gpu.index % 2 == 0 else "FSDPPolicyWorker"
            actors.append(
                ActorRow(
                    actor_id=f"{rank:032x}",
                    class_name=cls,
                    name=f"{cls}_{rank}",
                    state="ALIVE",
                    job_id="01000000",
                    node_id=node.node_id,
                    pid=gpu.processes[0].pid,
                    num_restarts=0,
                    required_resources={"GPU": 1.0, "CPU": 1.0},
                )
            )
    return actors
