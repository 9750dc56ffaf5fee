"""Provides the job the multi-host tests run: one actor on each worker host (placed by Ray's `node:<IP>`
resource), each printing one line that names its host and then spinning in `spin_on_worker_host`, and a
driver that waits. Run as the job's entrypoint: `python multihost_job.py IP [IP ...]`."""

from __future__ import annotations

import socket
import sys
import time

import ray

GREETING = "multihost actor on"
"""Each actor prints `GREETING <host name> <IP>` once, to its own log on its own host."""


@ray.remote(num_cpus=0)
class HostActor:
    def __init__(self) -> None:
        print(f"{GREETING} {socket.gethostname()} {ray.util.get_node_ip_address()}", flush=True)

    def where(self) -> str:
        return ray.util.get_node_ip_address()

    def spin(self) -> None:
        spin_on_worker_host()


def spin_on_worker_host() -> None:
    """Where every actor's stack is while the job runs (the tests look for this name)."""
    while True:
        time.sleep(0.2)


def main(ips: list[str]) -> None:
    ray.init()
    actors = [HostActor.options(resources={f"node:{ip}": 0.01}).remote() for ip in ips]  # type: ignore[attr-defined]
    placed = ray.get([a.where.remote() for a in actors])
    assert placed == ips, (placed, ips)
    for actor in actors:
        actor.spin.remote()
    print(f"{len(actors)} actors placed: {' '.join(placed)}", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
