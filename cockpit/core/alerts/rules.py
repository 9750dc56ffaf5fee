"""Provides the alert rules: what the cockpit saw (`Observation`) turned into `Finding`s, one per thing
worth telling the user, each under a rule of `RULES` with its id and severity.

Two kinds of rule. An *event* happens once (a job failed, a node died, a metric went NaN at step N): it
is told once and never "resolved". A *condition* lasts (a hang, work stuck pending, the walltime running
out): it is told when it begins (after `Finding.hold` seconds of it, for the ones with a threshold), a
reminder while it lasts, and "resolved" when it ends: `AlertBook` keeps that bookkeeping, this module
only says what is true at one moment. Nothing here reads a clock, a file or the network: the TUI and
`cockpit alerts` build the same `Observation` from what they polled and get the same findings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from cockpit.core.cluster.oom import LABELS, classify
from cockpit.core.text import clean
from cockpit.core.units import duration

if TYPE_CHECKING:
    from cockpit.core.actors.pending import PendingReport
    from cockpit.core.config.settings import AlertSettings
    from cockpit.core.doctor.hang import Verdict
    from cockpit.core.memory.report import OomKill
    from cockpit.core.metrics.series import NonFinite
    from cockpit.core.slurm.queue import SlurmJob
    from cockpit.core.snapshots import JobRow, NodeSnapshot

Severity = Literal["info", "warning", "error"]
MESSAGE_CHARS = 300
_RAY_LOGS_TAIL = re.compile(r",? last available logs \(truncated to [\d,]+ chars\):?\s*$")
"""A finding's message is cut here (a job's error message can be megabytes)."""


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    event: bool
    """True: told once; False: a condition, told, reminded and resolved."""
    says: str
    """What it is about, for `cockpit alerts --help` and the README."""


RULES: Mapping[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule("job_failed", "error", True, "a job ended FAILED"),
        Rule("job_succeeded", "info", True, "a job ended SUCCEEDED"),
        Rule("oom", "error", True, "a job failed because memory ran out (Ray's OOM killer or the kernel's)"),
        Rule("nan", "error", True, "a metric in a job's driver log went NaN or infinite (the step is named)"),
        Rule("node_dead", "error", True, "a node of the cluster is DEAD (Ray's reason is given)"),
        Rule("slurm_ended", "error", True, "the Slurm job holding the cluster ended"),
        Rule("hang", "error", False, "a running job made no progress for its `hang_after`"),
        Rule("straggler", "warning", False, "one role's GPUs idle while another's work"),
        Rule("stuck", "warning", False, "actors or placement groups pending longer than `pending_after`"),
        Rule("walltime", "warning", False, "the Slurm job's walltime left is under `walltime_under`"),
        Rule("unreachable", "warning", False, "the cluster could not be seen for `unreachable_after`"),
    )
}
"""Every rule, by id (the id is what `alerts.off` in the config and the JSON's `rule` name)."""


@dataclass(frozen=True)
class Thresholds:
    """The numbers of the rules that have one (seconds), from the config's `alerts:`."""

    pending_after: float = 600.0
    walltime_under: float = 1800.0
    unreachable_after: float = 120.0
    off: frozenset[str] = frozenset()
    """Rule ids turned off."""

    @classmethod
    def of(cls, settings: AlertSettings) -> Thresholds:
        """The thresholds the config's `alerts:` sets (the TUI and `cockpit alerts` read them alike)."""
        return cls(
            pending_after=settings.pending_after,
            walltime_under=settings.walltime_under,
            unreachable_after=settings.unreachable_after,
            off=settings.off,
        )


@dataclass(frozen=True)
class Finding:
    """One thing true now, under one rule."""

    rule: str
    subject: str
    """What it is about, unique within its target and rule (a job id, a node id, `job/key`)."""
    message: str
    """One line of safe text (cluster text cleaned), naming the job or node."""
    job: str = ""
    node: str = ""
    step: int | None = None
    hold: float = 0.0
    """A condition is told only once it has lasted this long (seconds)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.subject)


@dataclass(frozen=True)
class Observation:
    """What one look at one target saw; None: not looked at this time (nothing concluded from it)."""

    jobs: Sequence[JobRow] | None = None
    nodes: Sequence[NodeSnapshot] | None = None
    hangs: Mapping[str, Verdict] = field(default_factory=dict)
    """Job key -> its hang watch's verdict (the running jobs watched)."""
    nonfinite: Mapping[str, Sequence[NonFinite]] = field(default_factory=dict)
    """Job key -> the metrics of its driver log that went NaN or infinite."""
    stuck: PendingReport | None = None
    oom_kills: Sequence[OomKill] | None = None
    """The workers Ray's memory monitor killed (the cluster's worker table; a job that survives a kill,
    its actor restarted, is told too)."""
    slurm: SlurmJob | None = None
    unreachable: str = ""
    """Why the cluster cannot be seen now ("" when it can)."""
    now: float = 0.0
    """Wall-clock seconds (the Slurm walltime is read against it)."""


def findings(seen: Observation, limits: Thresholds | None = None) -> list[Finding]:
    """Every finding of SEEN, rules turned off left out."""
    limits = limits or Thresholds()
    found: list[Finding] = []
    for job in seen.jobs or ():
        found.extend(_job_findings(job))
    for node in seen.nodes or ():
        if node.state == "DEAD":
            why = f": {node.state_message}" if node.state_message else ""
            where = node.hostname or node.ip
            found.append(
                Finding(
                    "node_dead",
                    node.node_id,
                    _line(f"node {where} ({node.node_id[:8]}) is DEAD{why}"),
                    node=node.node_id,
                )
            )
    for key, verdict in seen.hangs.items():
        if verdict.hung:
            found.append(Finding("hang", key, _line(f"{key}: {verdict.line}"), job=key))
        elif verdict.straggler:
            found.append(Finding("straggler", key, _line(f"{key}: {verdict.straggler}"), job=key))
    for key, alarms in seen.nonfinite.items():
        for alarm in alarms:
            found.append(
                Finding(
                    "nan",
                    f"{key}/{alarm.key}",
                    _line(f"{key}: {alarm.key} went {alarm.value} at step {alarm.step}"),
                    job=key,
                    step=alarm.step,
                )
            )
    if seen.stuck is not None:
        for item in seen.stuck.items:
            subject = item.ident or item.sentence[:120]
            found.append(
                Finding(
                    "stuck",
                    subject,
                    _line(f"not running: {item.sentence}"),
                    job=item.job_id,
                    hold=limits.pending_after,
                )
            )
    for kill in seen.oom_kills or ():
        if kill.kind == "ray":  # certain; a SIGKILL that may have been the kernel's is not an alert
            where = f"node {kill.ip}" + (f", pid {kill.pid}" if kill.pid else "")
            whose = f"job {kill.job_id}: " if kill.job_id else ""
            found.append(
                Finding(
                    "oom",
                    kill.worker_id,
                    _line(f"{whose}{kill.label} killed a worker ({where}): {kill.message}"),
                    job=kill.job_id,
                    node=kill.node_id,
                )
            )
    found.extend(_slurm_findings(seen, limits))
    if seen.unreachable:
        found.append(
            Finding(
                "unreachable",
                "cluster",
                _line(f"cannot see the cluster: {seen.unreachable}"),
                hold=limits.unreachable_after,
            )
        )
    return [f for f in found if f.rule not in limits.off]


def looked_at(seen: Observation) -> frozenset[str]:
    """The rules SEEN could judge: a condition of any other rule stays as it was (not seeing a hang
    because the cluster is out of reach is not its end)."""
    rules = set()
    if seen.unreachable or seen.jobs is not None:  # tried the cluster: out of reach, or seen
        rules.add("unreachable")
    if seen.jobs is not None:
        rules |= {"job_failed", "job_succeeded", "oom", "hang", "straggler", "nan"}
    if seen.nodes is not None:
        rules.add("node_dead")
    if seen.stuck is not None:
        rules.add("stuck")
    if seen.oom_kills is not None:
        rules.add("oom")
    if seen.slurm is not None:
        rules |= {"slurm_ended", "walltime"}
    return frozenset(rules)


def _job_findings(job: JobRow) -> list[Finding]:
    # The job and its start: a new cluster at the same address numbers its drivers from 01000000 again.
    subject = f"{job.key}@{int(job.start_time or 0)}"
    if job.status == "SUCCEEDED":
        return [Finding("job_succeeded", subject, _line(f"job {job.key} SUCCEEDED"), job=job.key)]
    if job.status != "FAILED":
        return []
    first = job.message.strip().splitlines()[0] if job.message.strip() else ""
    first = _RAY_LOGS_TAIL.sub("", first)  # the logs it announces are not in the alert
    said = [
        Finding(
            "job_failed",
            subject,
            _line(f"job {job.key} FAILED" + (f": {first}" if first else "")),
            job=job.key,
        )
    ]
    kind = classify(job.message, error_type=job.error_type)
    if kind is not None:
        said.append(Finding("oom", subject, _line(f"job {job.key}: {LABELS[kind]}"), job=job.key))
    return said


def _slurm_findings(seen: Observation, limits: Thresholds) -> list[Finding]:
    job = seen.slurm
    if job is None:
        return []
    if job.ended:
        return [Finding("slurm_ended", job.job_id, _line(job.describe(seen.now)))]
    left = job.seconds_left(seen.now)
    if left is not None and left <= limits.walltime_under:
        return [
            Finding(
                "walltime",
                job.job_id,
                _line(f"slurm job {job.job_id} reaches its time limit in {duration(left)}: checkpoint now"),
            )
        ]
    return []


def _line(text: str) -> str:
    text = clean(text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
