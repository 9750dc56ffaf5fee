"""Provides the sbatch script of `cockpit slurm up`: a Ray cluster on the job's nodes, the join gate, then
the profile's job through the cockpit's own launch path; the Slurm job ends with the Ray job.

The pattern is the seeds' (NeMo RL's `ray.sub`, verl's `ray_on_slurm.slurm`): the batch script runs on
the allocation's first node; `srun --overlap -w HOST` starts `ray start --head --block` there and
`ray start --address=HEAD --block` on every other node, each with a temp dir of its own; their output
goes to `<submit dir>/<jobid>-logs/` (`ray-head.log`, `ray-worker-N.log`) as `ray.sub`'s does, so the
Logs screen offers them before the dashboard exists. The script then runs `cockpit wait` (the join gate:
every node and GPU of the allocation) and `cockpit submit --follow`, and exits with the job's result.

The dashboard binds 127.0.0.1 on the head at a free port the script picks; it writes
`cockpit:dashboard_port=PORT` in the job's comment, where `slurm:JOBID` finds it. Where Ray has token
auth (2.52 and newer) the cluster gets a fresh token, kept in a 0600 file in the user's private state
directory (`state/slurm/JOBID/token`, the home directory being shared with the login node), never in the
script. The profile's secrets stay in the environment sbatch passes on (`--export=ALL`, Slurm's default).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from cockpit.core.errors import CockpitError
from cockpit.core.local.record import private_dir, state_dir
from cockpit.core.slurm.queue import COMMENT_STARTING

TOKEN_AUTH_SINCE = (2, 52)
"""The first Ray with token auth (`RAY_AUTH_MODE=token`)."""
SBATCH_TIMEOUT = 60.0
"""A busy slurmctld can take long to accept a job; killing sbatch early may leave a job queued anyway."""
JOIN_TIMEOUT_SECONDS = 900
"""How long the script waits for every node to join before it gives up (exit 3, the job ends)."""


@dataclass(frozen=True)
class SlurmRequest:
    """What `cockpit slurm up` asks of Slurm and runs in the allocation."""

    profile: Path
    """The profile file, by absolute path (the compute nodes share the filesystem)."""
    profile_name: str
    nodes: int
    gpus_per_node: int
    overrides: tuple[str, ...] = ()
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    job_name: str | None = None
    python: str = sys.executable
    """The cockpit's interpreter; the cluster runs the Ray installed beside it."""


def tokens_dir() -> Path:
    return state_dir() / "slurm"


def job_token(job_id: str) -> str | None:
    """The token the script of job JOB_ID made for its cluster; None when there is none (another script,
    an older Ray, or a home directory the compute nodes do not share)."""
    if not job_id.replace("_", "").replace("+", "").isdigit():
        return None
    try:
        return (tokens_dir() / job_id / "token").read_text().strip() or None
    except OSError:
        return None


def ray_has_token_auth(version: str | None = None) -> bool:
    """Whether the Ray beside the cockpit (or VERSION) has token auth."""
    try:
        version = version or metadata.version("ray")
    except metadata.PackageNotFoundError:
        return False
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts) >= TOKEN_AUTH_SINCE


def prepare_tokens_dir() -> Path:
    """The private directory the job's script writes its token in (made 0700, the state directory too)."""
    private_dir()
    return private_dir(tokens_dir())


async def sbatch(script: str, *options: str) -> str:
    """Submit SCRIPT (on sbatch's stdin: no file of it is left here) with sbatch OPTIONS; its job id.

    Raises:
        SlurmError: sbatch is missing or refused the job (its reason).
    """
    from cockpit.core.slurm.queue import SlurmError, run

    try:
        out = await run("sbatch", "--parsable", *options, stdin=script.encode(), timeout=SBATCH_TIMEOUT)
    except SlurmError as exc:
        if "did not answer" in str(exc):
            raise SlurmError(
                f"{exc} The job may be queued anyway: check `squeue --me` before again."
            ) from None
        raise
    return out.strip().split(";", 1)[0]


def render(request: SlurmRequest, *, tokens: Path | None) -> str:
    """The sbatch script for REQUEST (`slurm_up.sh` filled in, every value shell-quoted; no secret in
    it). TOKENS: the directory for the cluster's token (None: the cluster runs without token auth, as
    Ray before 2.52 does)."""
    q = shlex.quote
    directives = [
        f"--job-name={request.job_name or 'cockpit-' + request.profile_name}",
        f"--nodes={request.nodes}",
        "--ntasks-per-node=1",
        f"--comment={COMMENT_STARTING}",  # until the script writes the port it chose
    ]
    if request.gpus_per_node:
        directives.append(f"--gpus-per-node={request.gpus_per_node}")
    asked = {"partition": request.partition, "account": request.account, "time": request.time}
    directives += [f"--{flag}={value}" for flag, value in asked.items() if value]
    for directive in directives:
        # A newline in a value would end the #SBATCH line inside its quotes: bash would run the rest.
        if not directive.isprintable():
            raise CockpitError(
                f"{directive[2:].split('=')[0]}: control characters are not allowed: {directive!r}"
            )
    values = {
        "@SBATCH@": "\n".join(f"#SBATCH {q(d)}" for d in directives),
        "@PYTHON@": q(request.python),
        "@RAY@": q(str(Path(request.python).parent / "ray")),
        "@PROFILE@": q(str(request.profile)),
        "@OVERRIDES@": " ".join(q(o) for o in request.overrides),
        "@GPUS_PER_NODE@": str(int(request.gpus_per_node)),
        "@TOKENS@": q(str(tokens)) if tokens is not None else "''",
        "@JOIN_TIMEOUT@": str(JOIN_TIMEOUT_SECONDS),
    }
    template = resources.files("cockpit.core.slurm").joinpath("slurm_up.sh").read_text(encoding="utf-8")
    return re.sub("|".join(re.escape(k) for k in values), lambda m: values[m.group()], template)
