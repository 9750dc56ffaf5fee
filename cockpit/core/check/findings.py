"""Provides what `cockpit check` reports: one `Finding` per check and host, and the `CheckReport` of them.

A finding is one line for the user: which check, on which host, its status, what was found and, when it
is not a pass, the fix in one sentence. The report is the whole list in a stable order (the cluster's
checks first, then each machine's, head first) and says whether everything that was checked works.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["pass", "fail", "warn", "skip"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "skip")
"""PASS: works. FAIL: a cockpit feature will not work until it is fixed. WARN: works, with a caveat (or
only some features are affected). SKIP: not checked, and why (a check it depends on failed, or it does
not apply to this target)."""


@dataclass(frozen=True)
class Finding:
    check: str
    """What was checked, in the user's words (`ssh`, `host key`, `token`, `py-spy`, `ptrace`, `clock` ...)."""
    host: str
    """Where: the TARGET for the cluster's checks, `hostname [ip]` for a machine's."""
    status: Status
    detail: str
    """What was found (may quote the cluster: shown as text, never markup)."""
    fix: str = ""
    """What to do, in one sentence; "" for a pass (and for a skip whose reason is the fix elsewhere)."""

    def as_json(self) -> dict[str, str]:
        return {
            "check": self.check,
            "host": self.host,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class CheckReport:
    target: str
    findings: tuple[Finding, ...]

    @property
    def counts(self) -> dict[str, int]:
        seen = Counter(f.status for f in self.findings)
        return {status: seen.get(status, 0) for status in STATUSES}

    @property
    def failed(self) -> bool:
        """Whether any check failed (warnings and skips do not fail the report)."""
        return any(f.status == "fail" for f in self.findings)

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "ok": not self.failed,
            "counts": self.counts,
            "checks": [f.as_json() for f in self.findings],
        }


def render_lines(report: CheckReport, clean: Any = str) -> list[str]:
    """One line per finding: `STATUS  HOST  CHECK  detail — fix: ...`, columns aligned; CLEAN makes each
    field that may quote the cluster safe to print (`cockpit.core.text.clean`)."""
    if not report.findings:
        return []
    hosts = [clean(f.host) for f in report.findings]
    host_width = min(max(len(h) for h in hosts), 40)
    check_width = max(len(f.check) for f in report.findings)
    lines = []
    for finding, host in zip(report.findings, hosts, strict=False):
        text = f"{finding.status.upper():4}  {host:{host_width}}  {finding.check:{check_width}}  "
        text += clean(finding.detail)
        if finding.fix:
            text += f" — fix: {clean(finding.fix)}"
        lines.append(text.rstrip())
    return lines


def summary(report: CheckReport) -> str:
    counts = report.counts
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts[s]]
    verdict = "some checks failed" if report.failed else "everything checked works"
    return f"{verdict}: {', '.join(parts)}"
