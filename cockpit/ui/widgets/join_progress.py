"""Provides the join-progress panel: expected vs joined nodes and GPUs, time waited, ready or waiting.

Shown again on every poll, so written through `TextPanel.put`: unchanged text is not written again.
"""

from __future__ import annotations

import time
from dataclasses import replace

from rich.text import Text

from cockpit.core.cluster.join import JoinProgress
from cockpit.core.slurm.queue import SlurmJob, clock
from cockpit.core.units import duration
from cockpit.ui.widgets.safe_text import clean
from cockpit.ui.widgets.text_panel import TextPanel


def bar(done: float, total: float, width: int = 20) -> str:
    filled = width if total <= 0 else min(width, round(width * done / total))
    return "█" * filled + "░" * (width - filled)


class JoinPanel(TextPanel):
    """Join progress; the `ready` / `waiting` CSS classes colour its border."""

    DEFAULT_CSS = """
    JoinPanel { height: auto; border: round $warning; padding: 0 1; }
    JoinPanel.ready { border: round $success; }
    """

    def __init__(self, expect_nodes: int | None, expect_gpus: float | None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.expect_nodes = expect_nodes
        self.expect_gpus = expect_gpus
        self.started = time.time()
        self.was_waiting = False
        """True once the panel saw the cluster short of what was expected."""
        self.waited_for: float | None = None
        """Seconds from opening to ready, when the cockpit watched the nodes join."""
        self.border_title = "Join progress"

    def show(self, progress: JoinProgress) -> None:
        if progress.ready and self.was_waiting:
            self.waited_for = time.time() - self.started
        if not progress.ready:
            self.was_waiting = True
            self.waited_for = None
        self.set_class(progress.ready, "ready")
        text = Text()
        exp_nodes = progress.expected_nodes or progress.alive_nodes
        exp_gpus = progress.expected_gpus if progress.expected_gpus is not None else progress.alive_gpus
        text.append(f"Nodes {progress.alive_nodes:>4}/{exp_nodes:<4} ")
        text.append(
            bar(progress.alive_nodes, exp_nodes), style="green" if progress.missing_nodes == 0 else "yellow"
        )
        text.append(f"   GPUs {progress.alive_gpus:>5g}/{exp_gpus:<5g} ")
        text.append(
            bar(progress.alive_gpus, exp_gpus), style="green" if progress.missing_gpus == 0 else "yellow"
        )
        text.append("\n")
        if progress.ready:
            text.append("READY", style="bold green")
            if progress.expected_nodes is None and progress.expected_gpus is None:
                text.append(" (no --expect-nodes/--expect-gpus given: showing what joined)", style="dim")
            elif self.waited_for is None:
                text.append(": all expected nodes and GPUs joined")
            else:
                text.append(f": all expected nodes and GPUs joined after {duration(self.waited_for)}")
        else:
            text.append("WAITING", style="bold yellow")
            text.append(f" {duration(time.time() - self.started)}: ")
            text.append(progress.summary().split(" — waiting: ", 1)[-1])
        if progress.dead:
            text.append(f"   {len(progress.dead)} dead node(s), see the table", style="bold red")
        self.put(text)

    def show_slurm(self, job: SlurmJob) -> None:
        """Before the cluster exists (a `slurm:` job waiting in the queue) or after it is gone: the
        job's state, Slurm's reason, the start estimate and the shape it will have."""
        self.set_class(False, "ready")
        text = Text()
        job = replace(job, name=clean(job.name), reason=clean(job.reason), node_list=clean(job.node_list))
        if job.waiting:
            text.append("QUEUED", style="bold yellow")
            text.append(f" in Slurm: {job.state}")
            if job.reason:
                text.append(f" ({job.reason})")
            text.append(
                f" · expected start {clock(job.start_time)}" if job.start_time else " · no start estimate"
            )
        elif job.running:
            text.append("STARTING", style="bold yellow")
            text.append(f": slurm job {job.job_id} runs on {job.num_nodes} node(s) ({job.node_list}); ")
            text.append(f"waiting for the Ray head's dashboard on {job.head or '?'}")
        else:
            text.append(job.state, style="bold red" if job.ended else "bold yellow")
            text.append(f": {job.describe()}")
        gpus = f" x {job.gpus_per_node:g} GPUs" if job.gpus_per_node else ""
        text.append(f"\nwill have {job.num_nodes} node(s){gpus}" if job.waiting else "")
        self.put(text)
