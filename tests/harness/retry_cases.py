"""Provides one error of every class a retry loop can meet, made the way the cockpit makes it (from an
HTTP status and body, a TARGET, an SSH config, a Slurm job), with whether the one rule
(`cockpit.core.errors.is_permanent`) must call it permanent.

The unit tests check the rule on each; `cockpit wait`'s loop and the TUI's cluster feed are each driven
into each error, and must give up on the same ones and retry the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from cockpit.core.cluster.errors import (
    DashboardOff,
    DashboardUnreachable,
    LogStalled,
    RequestRejected,
    SelectorError,
    http_error,
    old_log_error,
)
from cockpit.core.config.layouts import LayoutError
from cockpit.core.config.role_table import RolesError
from cockpit.core.config.settings import ConfigError
from cockpit.core.config.yaml_file import ConfigFileError
from cockpit.core.connect.without_dashboard import sentence
from cockpit.core.debug.errors import AttachError, DapBusy, DapClosed, DapError, PdbError
from cockpit.core.doctor.errors import SelectionError, StackParseError
from cockpit.core.errors import CockpitError
from cockpit.core.gpu.errors import AgentFailed, NoGpuFound
from cockpit.core.jobs.errors import LaunchBlocked, OverrideError, UploadError
from cockpit.core.jobs.profile_load import ProfileError
from cockpit.core.local.record import LocalClusterError
from cockpit.core.logs.position import FileReplaced
from cockpit.core.slurm.queue import SlurmError, SlurmJob, SlurmNotRunning
from cockpit.core.snapshots import JobNotFound
from cockpit.core.ssh.config import config_files
from cockpit.core.ssh.errors import (
    AuthenticationFailed,
    HostKeyChanged,
    PassphraseNeeded,
    SshError,
    UnknownHostKey,
)
from cockpit.core.targets import parse_target

KEY = asyncssh.generate_private_key("ssh-ed25519").convert_to_public()


def _raised(make: Callable[[], object]) -> BaseException:
    try:
        make()
    except BaseException as exc:  # what the cockpit's own code raises, caught to be handed out
        return exc
    raise AssertionError("expected an error")


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], BaseException]
    permanent: bool

    def __str__(self) -> str:
        return self.name


def _http(status: int, body: str = "nope") -> Callable[[], BaseException]:
    return lambda: http_error(status, "/api/v0/nodes", body.encode())


CASES = [
    # The dashboard.
    Case("unreachable", lambda: DashboardUnreachable("cannot reach the Ray dashboard at x"), False),
    Case("log-stalled", lambda: LogStalled("the log stream stalled"), False),
    # The head runs Ray without its dashboard: only a restart of Ray brings what needs it.
    Case("dashboard-off", lambda: DashboardOff(sentence("head-node")), True),
    Case("rate-limited", _http(429, "Max number of in-progress requests=100 reached"), False),
    Case("http-500-no-reason", _http(500, "Server got itself in trouble"), False),
    Case("http-503", _http(503, "Service Unavailable"), False),
    Case("auth-required", _http(401), True),
    Case("auth-rejected", _http(403), True),
    Case("profiling-disabled", _http(403, "Profiling is disabled"), True),
    Case("not-found", _http(404), True),
    Case("request-rejected-400", _http(400, "bad filter"), True),
    Case("unreadable-answer", lambda: RequestRejected("unexpected answer from /api/v0/nodes."), True),
    Case("log-read-failed", lambda: old_log_error(b"[get_logs] Fetch log error: boom", "x.log"), True),
    Case("selector", lambda: SelectorError("no actor 'x' (an actor id or its start, or a name)."), True),
    # SSH.
    Case("ssh-no-answer", lambda: SshError("cannot connect to head: no answer within 15 s"), False),
    Case("ssh-config-missing", lambda: _raised(lambda: config_files("/nonexistent/ssh_config")), True),
    Case("ssh-host-key-changed", lambda: HostKeyChanged("the host key of head changed"), True),
    Case(
        "ssh-host-key-unknown",
        lambda: UnknownHostKey("unknown host key", "head", 22, KEY, Path("/nonexistent/known_hosts")),
        True,
    ),
    Case("ssh-auth-refused", lambda: AuthenticationFailed("head refused every key"), True),
    Case("ssh-passphrase", lambda: PassphraseNeeded("the key needs its passphrase"), True),
    # Slurm.
    Case("slurm-busy", lambda: SlurmError("`scontrol show job` did not answer within 10 s"), False),
    Case(
        "slurm-missing", lambda: SlurmError("Slurm's `scontrol` is not installed here", permanent=True), True
    ),
    Case(
        "slurm-queued",
        lambda: SlurmNotRunning(SlurmJob(job_id="7", state="PENDING", reason="Priority")),
        False,
    ),
    Case("slurm-ended", lambda: SlurmNotRunning(SlurmJob(job_id="7", state="TIMEOUT")), True),
    # The target, the local cluster, jobs, the doctor, the debugger, logs.
    Case("target", lambda: _raised(lambda: parse_target("http://")), True),
    Case("local-cluster", lambda: LocalClusterError("no local cluster is running"), True),
    Case("job-not-found", lambda: JobNotFound("no job x on the cluster"), True),
    Case("override", lambda: OverrideError("x is not KEY=VALUE"), True),
    Case("upload", lambda: UploadError("the working_dir is over the limit"), True),
    Case("launch-blocked", lambda: LaunchBlocked("a secret is not set"), True),
    Case("selection", lambda: SelectionError("job x has no alive process"), True),
    Case("stack-parse", lambda: StackParseError("not a py-spy dump"), True),
    Case("dap-failed", lambda: DapError("the adapter's answer has no body"), True),
    Case("dap-busy", lambda: DapBusy("another client holds the worker"), False),
    Case("dap-closed", lambda: DapClosed("the debug session is over"), True),
    Case("attach-busy", lambda: AttachError("the worker is held", busy=True), False),
    Case("attach-gone", lambda: AttachError("the worker is gone"), True),
    Case("profile", lambda: ProfileError("x.yaml:3: cluster.nodes: must be a number"), True),
    Case("config-file", lambda: ConfigFileError("x.yaml:1: not a mapping"), True),
    Case("config", lambda: ConfigError("config.yaml:2: refresh: must be a mapping"), True),
    Case("layout", lambda: LayoutError("wide.yaml:3: cockpit: unknown pane 'x'"), True),
    Case("roles", lambda: RolesError("roles.yaml:1: Foo: not a role"), True),
    Case("gpu-agent", lambda: AgentFailed("10.0.0.2: the agent stopped"), True),
    Case("no-gpu", lambda: NoGpuFound("no NVIDIA or AMD GPU found"), True),
    Case("pdb", lambda: PdbError("the pdb session went away"), True),
    Case("file-replaced", lambda: FileReplaced("the bytes changed"), True),
    Case("plain-cockpit-error", lambda: CockpitError("cannot read the token file x"), True),
    Case("a-bug", lambda: ValueError("a bug"), True),
]
"""Every class of error, by the name a test id shows."""
