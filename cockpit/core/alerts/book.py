"""Provides `AlertBook`: the findings of each look at one target turned into the alerts to send, each
event once, each condition once when it begins, a reminder at most every `remind_every` seconds while it
lasts, and "resolved" when it ends.

The first look at each rule is a baseline: events already over when the watch began (jobs that
ended yesterday, a node dead for a week) are remembered, never told; conditions seen then are told (a
hang now is news). A rule not looked at this time (`looked`: the cluster could not be reached) keeps its
conditions open: not seeing a hang is not its end. Memory is bounded: at most `MAX_REMEMBERED` told
events are kept (the oldest forgotten first; Ray stops listing jobs that old anyway).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from cockpit.core.alerts.rules import RULES, Finding, Severity

State = Literal["firing", "reminder", "resolved"]
MAX_REMEMBERED = 100_000
DEFAULT_REMIND_EVERY = 1800.0


@dataclass(frozen=True)
class Alert:
    """One alert to send: a finding of one target at one moment, in one state."""

    target: str
    rule: str
    severity: Severity
    state: State
    subject: str
    message: str
    since: float
    """When what it is about began (wall-clock seconds)."""
    at: float
    """When this alert was made."""
    number: int = 1
    """The how-manyeth time this rule and subject began (a hang that ends and comes back is a new one)."""
    job: str = ""
    node: str = ""
    step: int | None = None

    @property
    def id(self) -> str:
        """The same for the firing, its reminders and its resolution; new for a new occurrence, also
        across restarts of the cockpit (it ends with when the occurrence began)."""
        return f"{self.target}|{self.rule}|{self.subject}|{int(self.since)}"

    @property
    def line(self) -> str:
        """One line for a terminal or a log: `✖ local: job raysubmit_x FAILED: ...`."""
        mark = {"error": "✖", "warning": "⚠", "info": "✔"}[self.severity]
        if self.state == "resolved":
            mark = "✔ resolved:"
        elif self.state == "reminder":
            mark += " still:"
        return f"{mark} {self.target}: {self.message}"

    def as_json(self) -> dict[str, Any]:
        """The alert as the JSON of `--json` and of `alerts.command`'s standard input."""
        return {
            "id": self.id,
            "target": self.target,
            "rule": self.rule,
            "severity": self.severity,
            "state": self.state,
            "message": self.message,
            "job": self.job or None,
            "node": self.node or None,
            "step": self.step,
            "since": _iso(self.since),
            "time": _iso(self.at),
        }


def _iso(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


@dataclass
class _Open:
    finding: Finding
    since: float
    number: int
    told_at: float | None = None


class AlertBook:
    """The alerts of one target (see the module's docstring)."""

    def __init__(self, target: str, remind_every: float = DEFAULT_REMIND_EVERY) -> None:
        self.target = target
        self.remind_every = remind_every
        """Seconds between reminders of a lasting condition; 0: none."""
        self._open: dict[tuple[str, str], _Open] = {}
        self._told: dict[tuple[str, str], None] = {}
        self._numbers: dict[tuple[str, str], int] = {}
        self._looked: set[str] = set()
        """Rules looked at before: an event of a rule looked at for the first time is a baseline."""

    @property
    def open(self) -> list[Alert]:
        """The conditions told and not over, oldest first (what `cockpit runs` shows as open)."""
        return [
            self._alert(o.finding, "firing", o.since, o.told_at or o.since, o.number)
            for o in self._open.values()
            if o.told_at is not None
        ]

    def update(
        self, found: Iterable[Finding], now: float, looked: Collection[str] | None = None
    ) -> list[Alert]:
        """The alerts that FOUND, one look at NOW, gives: `looked` names the rules this look could judge
        (None: all)."""
        judged = set(RULES) if looked is None else set(looked)
        baseline = judged - self._looked
        self._looked |= judged
        out: list[Alert] = []
        present: set[tuple[str, str]] = set()
        for finding in found:
            rule = RULES[finding.rule]
            key = finding.key
            if rule.event:
                if key in self._told:
                    continue
                self._remember(key)
                if finding.rule not in baseline:
                    out.append(self._alert(finding, "firing", now, now, self._next(key)))
                continue
            present.add(key)
            entry = self._open.get(key)
            if entry is None:
                entry = self._open[key] = _Open(finding, now, 0)
            entry.finding = finding  # the newest words ("no progress for 14 min")
            if entry.told_at is None:
                if now - entry.since >= finding.hold:
                    entry.number = self._next(key)
                    entry.told_at = now
                    out.append(self._alert(finding, "firing", entry.since, now, entry.number))
            elif self.remind_every > 0 and now - entry.told_at >= self.remind_every:
                entry.told_at = now
                out.append(self._alert(finding, "reminder", entry.since, now, entry.number))
        for key in [k for k in self._open if k not in present and (looked is None or k[0] in looked)]:
            entry = self._open.pop(key)
            if entry.told_at is not None:
                out.append(self._alert(entry.finding, "resolved", entry.since, now, entry.number))
        return out

    def _next(self, key: tuple[str, str]) -> int:
        number = self._numbers.get(key, 0) + 1
        self._numbers[key] = number
        if len(self._numbers) > MAX_REMEMBERED:
            self._numbers.pop(next(iter(self._numbers)))
        return number

    def _remember(self, key: tuple[str, str]) -> None:
        self._told[key] = None
        if len(self._told) > MAX_REMEMBERED:
            self._told.pop(next(iter(self._told)))

    def _alert(self, finding: Finding, state: State, since: float, at: float, number: int) -> Alert:
        return Alert(
            target=self.target,
            rule=finding.rule,
            severity=RULES[finding.rule].severity if state != "resolved" else "info",
            state=state,
            subject=finding.subject,
            message=finding.message,
            since=since,
            at=at,
            number=number,
            job=finding.job,
            node=finding.node,
            step=finding.step,
        )
