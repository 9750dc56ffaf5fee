"""Provides the rules of `cockpit check` for the way in: SSH to the head and its host key, the token, the
dashboard and its Ray version, the job fields that version refuses. Pure functions: the tests give them
constructed errors and answers."""

from __future__ import annotations

from collections.abc import Sequence

from cockpit.core.check.findings import Finding
from cockpit.core.cluster.errors import AuthenticationRejected, AuthenticationRequired, DashboardUnreachable
from cockpit.core.cluster.versions import Field, parse_version, range_warning
from cockpit.core.ssh.errors import (
    AuthenticationFailed,
    HostKeyChanged,
    PassphraseNeeded,
    SshError,
    UnknownHostKey,
)


def connect_findings(target: str, error: BaseException) -> list[Finding]:
    """The findings when the connection to TARGET failed with ERROR (the checks after it are skipped by
    the caller)."""
    text = str(error)
    if isinstance(error, UnknownHostKey):
        where = error.host if error.port == 22 else f"{error.host} port {error.port}"
        return [
            Finding(
                "host key",
                target,
                "fail",
                f"the host key of {where} is unknown ({error.key.get_algorithm()} {error.fingerprint}): "
                "not accepted",
                f"verify that fingerprint with your admins, then run again with --accept-new to add it to "
                f"{error.known_hosts}",
            ),
            Finding("ssh", target, "skip", "not tried past an unknown host key"),
        ]
    if isinstance(error, HostKeyChanged):
        return [
            Finding(
                "host key",
                target,
                "fail",
                text,
                "if the admins replaced that key, remove the old line (ssh-keygen -R HOST) and record the "
                "new one after checking its fingerprint; otherwise do not connect (someone may be in "
                "between)",
            ),
            Finding("ssh", target, "skip", "not tried past a refused host key"),
        ]
    if isinstance(error, (AuthenticationFailed, PassphraseNeeded)):
        return [
            Finding("host key", target, "pass", "the head's host key matches known_hosts"),
            Finding(
                "ssh",
                target,
                "fail",
                text,
                "check User and IdentityFile of that host in your SSH config, or load the key with ssh-add",
            ),
        ]
    if isinstance(error, SshError):
        return [
            Finding("host key", target, "skip", "not reached"),
            Finding(
                "ssh",
                target,
                "fail",
                text,
                "check HostName, Port and ProxyJump of that host in your SSH config (`ssh -v` shows where "
                "it stops)",
            ),
        ]
    # Not SSH's doing (a local cluster that is not running, a Slurm job that waits or ended, a token file
    # that cannot be read): the error says what to do itself.
    return [Finding("target", target, "fail", text)]


def dashboard_findings(
    target: str, version: dict[str, str] | BaseException, auth_mode: str | None, exposure: str | None = None
) -> list[Finding]:
    """The `token` and `dashboard` findings from `/api/version` (or its error), the cluster's auth mode
    (`token`, `disabled`, `absent`; None if unknown) and the exposure warning, if any."""
    if isinstance(version, AuthenticationRequired):
        return [
            Finding(
                "token",
                target,
                "fail",
                "the cluster uses token authentication and no token was given",
                "pass --token-file FILE or set RAY_AUTH_TOKEN (`ray get-auth-token` on the head prints it)",
            ),
            Finding("dashboard", target, "skip", "not asked without the token"),
        ]
    if isinstance(version, AuthenticationRejected):
        return [
            Finding(
                "token",
                target,
                "fail",
                "the dashboard rejected the token",
                "check --token-file / RAY_AUTH_TOKEN against `ray get-auth-token` on the head",
            ),
            Finding("dashboard", target, "skip", "not asked without a valid token"),
        ]
    if isinstance(version, DashboardUnreachable):
        return [
            Finding("token", target, "skip", "no dashboard to ask"),
            Finding(
                "dashboard",
                target,
                "fail",
                str(version),
                "start Ray on the head (ray start --head), or give its dashboard port with --dashboard-port",
            ),
        ]
    if isinstance(version, BaseException):
        return [
            Finding("token", target, "skip", "no answer from the dashboard"),
            Finding("dashboard", target, "fail", str(version), "the head's dashboard logs say why"),
        ]
    if auth_mode == "token":
        token = Finding("token", target, "pass", "the cluster uses token auth and accepts the token")
    elif exposure:
        token = Finding(
            "token",
            target,
            "warn",
            f"the cluster runs without token auth: {exposure.lstrip('⚠ ')}",
            "start the head with RAY_AUTH_MODE=token (Ray 2.52 or later), or keep its dashboard on 127.0.0.1",
        )
    else:
        token = Finding("token", target, "pass", "the cluster runs without token auth (none needed)")
    ray = version.get("ray_version", "")
    warning = range_warning(ray)
    if warning:
        dashboard = Finding(
            "dashboard",
            target,
            "warn",
            warning,
            "the cockpit is tested with Ray 2.43 to 2.60: use one of those",
        )
    else:
        dashboard = Finding("dashboard", target, "pass", f"Ray {ray} answers")
    return [token, dashboard]


def fields_finding(
    target: str,
    ray_version: str,
    fields: Sequence[Field],
    profiles: Sequence[tuple[str, Sequence[Field]]],
) -> Finding:
    """Which of the version-dependent job fields (FIELDS) RAY_VERSION refuses, and which of the user's
    PROFILES ((name, the fields it uses)) use one of them."""
    version = parse_version(ray_version)
    if version is None:
        return Finding("job fields", target, "skip", f"the Ray version {ray_version!r} cannot be read")
    refused = [field for field in fields if field.refused_by(version)]
    users = [(name, [f for f in used if f.refused_by(version)]) for name, used in profiles]
    users = [(name, bad) for name, bad in users if bad]
    if users:
        shown = "; ".join(f"{name} uses {', '.join(f.name for f in bad)}" for name, bad in users[:5])
        more = f" (and {len(users) - 5} more profiles)" if len(users) > 5 else ""
        return Finding(
            "job fields",
            target,
            "warn",
            f"Ray {ray_version} refuses fields of your profiles: {shown}{more}",
            "change those profiles, or run a Ray that accepts them (`cockpit submit --dry-run` lists them)",
        )
    count = len(profiles)
    checked = f"the {count} profile{'' if count == 1 else 's'} found" if profiles else "no profile found"
    if not refused:
        return Finding(
            "job fields",
            target,
            "pass",
            f"Ray {ray_version} accepts every job field the cockpit sends ({checked})",
        )
    names = ", ".join(f.name for f in refused[:3]) + (
        f" and {len(refused) - 3} more" if len(refused) > 3 else ""
    )
    return Finding(
        "job fields",
        target,
        "pass",
        f"Ray {ray_version} refuses {names}; {checked} use none of them",
    )
