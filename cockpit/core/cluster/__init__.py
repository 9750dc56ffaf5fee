"""Provides the dashboard client and what it reads: the REST calls, their JSON parsed into snapshots,
the join gate and the Ray versions the cockpit knows."""
