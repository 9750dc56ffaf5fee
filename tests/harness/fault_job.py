"""Provides the job the fault tests run (tests/integration/test_faults.py): a driver that prints numbered
lines at a steady pace, so a follower can prove that what it showed has no gap and no repeat; and,
given worker IPs, one restartable actor on each of those hosts (placed by Ray's `node:<IP>` resource),
asked for a beat every second, so a host lost under it shows the actor's death, its restart and the
job's fate.

Run as the entrypoint: `python fault_job.py LINES PERIOD [IP ...]`. It prints `line NNNNN` for NNNNN in
0..LINES-1, then `done`; an actor that cannot be reached is said in one line (`actor on IP: ...`) and
the job goes on, asking it again each second (a restarted actor answers again), and ends SUCCEEDED.
"""

from __future__ import annotations

import sys
import time

LINE_FORMAT = "line {:05d}"
ACTOR_LOST = "actor on {ip} lost: {reason}"


def main(lines: int, period: float, ips: list[str]) -> int:
    actors = {}
    if ips:
        import ray

        ray.init()

        @ray.remote(num_cpus=0, max_restarts=1, max_task_retries=0)
        class Beat:
            def beat(self) -> str:
                return ray.util.get_node_ip_address()

        for ip in ips:
            actors[ip] = Beat.options(resources={f"node:{ip}": 0.01}).remote()  # type: ignore[attr-defined]
        print(f"actors placed: {' '.join(ray.get([a.beat.remote() for a in actors.values()]))}", flush=True)
    failing: dict[str, str] = {}
    """Per actor, the kind of error its last beat got ("" once it answers again): each said once."""
    next_beat = time.monotonic()
    for number in range(lines):
        print(LINE_FORMAT.format(number), flush=True)
        if actors and time.monotonic() >= next_beat:
            next_beat = time.monotonic() + 1.0
            import ray

            pending = {ip: actor.beat.remote() for ip, actor in actors.items()}
            for ip, ref in pending.items():
                try:
                    ray.get(ref, timeout=5)
                except Exception as exc:  # ActorDiedError, GetTimeoutError, ActorUnavailableError
                    if failing.get(ip) != type(exc).__name__:
                        reason = " ".join(str(exc).split())[:200]
                        print(ACTOR_LOST.format(ip=ip, reason=f"{type(exc).__name__}: {reason}"), flush=True)
                    failing[ip] = type(exc).__name__
                else:
                    if failing.pop(ip, None):
                        print(f"actor on {ip} answers again", flush=True)
        time.sleep(period)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]))
