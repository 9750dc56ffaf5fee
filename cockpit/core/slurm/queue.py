"""Provides what the cockpit reads of a Slurm job: its state, why it waits, where its Ray head runs.

The cockpit runs on the login node, where Slurm's client commands are. A `slurm:JOBID` (or `slurm:NAME`)
TARGET is looked up with `scontrol show job -o` (one line of `Key=Value` fields, the same on every Slurm
since 17.x, unlike `--json`, which needs plugins many sites lack). While the job is PENDING its reason
and `squeue --start`'s estimate are what there is to show; once RUNNING, the head of the Ray cluster is
the allocation's first host (`scontrol show hostnames`), as in NeMo RL's `ray.sub` and verl's
`ray_on_slurm.slurm`; once it ended, Slurm's state and reason say why, and nothing is retried.

One `scontrol` call costs slurmctld one RPC: the TUI asks every `PENDING_POLL_SECONDS` while the job
waits and every `RUNNING_POLL_SECONDS` after (sites ask users to keep `squeue` loops to about that).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from cockpit.core.errors import CockpitError

PENDING_POLL_SECONDS = 10.0
RUNNING_POLL_SECONDS = 30.0
ENDING_POLL_SECONDS = 5.0
COMMAND_TIMEOUT = 15.0
"""Seconds for one Slurm command: a busy slurmctld answers slowly, a dead one not at all."""
WALLTIME_WARN_SECONDS = 600.0
"""Ten minutes before the time limit, the status bar warns (checkpoint now)."""

ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
"""States after which the job's nodes are gone: the cockpit says so and stops retrying."""
WAITING_STATES = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
)
"""States before the job's nodes run its script."""
ENDING_STATES = frozenset({"COMPLETING", "STAGE_OUT", "SIGNALING", "STOPPED"})
"""States of a job on its way out (its steps are being killed): the final state comes seconds later."""

COMMENT_STARTING = "cockpit:dashboard_port=pending"
"""The comment `cockpit slurm up` submits with: its script has not chosen the dashboard port yet."""
COMMENT_PORT = re.compile(r"(?:^|[\s,;])cockpit:dashboard_port=(\d{1,5})(?:$|[\s,;])")
"""What `cockpit slurm up`'s script writes in the job's comment once it picked the dashboard port."""

_FIELD = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z0-9_]*(?:[:/][A-Za-z0-9_:]+)*)=")
"""A `Key=` of `scontrol show job -o` (keys such as `AllocNode:Sid` and `CPUs/Task` included)."""


class SlurmError(CockpitError):
    """A Slurm command failed or is missing; one sentence saying which and what to do. Transient (a
    busy slurmctld, a command that timed out) unless raised `permanent=True` (no Slurm here, an unknown
    job)."""

    permanent = False


class SlurmNotRunning(CockpitError):
    """The job's Ray head cannot be reached because the job is not running: transient while it waits
    in the queue, permanent once it ended (or is on its way out)."""

    def __init__(self, job: SlurmJob) -> None:
        where = f"; its output: {job.stdout}" if job.ended and job.stdout else ""
        super().__init__(job.describe() + where, permanent=job.ended or job.ending)
        self.job = job

    def details(self) -> list[str]:
        """For a job that ended: the end of its Slurm output (why the head never came up, often)."""
        return output_tail(self.job) if self.job.ended else []

    @property
    def ended(self) -> bool:
        """Over, or on its way out: nothing to wait for."""
        return self.job.ended or self.job.ending


@dataclass(frozen=True)
class SlurmJob:
    """One Slurm job as `scontrol show job` described it (times as epoch seconds, this machine's clock)."""

    job_id: str
    name: str = ""
    state: str = "PENDING"
    reason: str = ""
    """Why it waits (`Priority`, `Resources`, `JobHeldUser` ...) or why it ended; empty for `None`."""
    node_list: str = ""
    """Slurm's compressed host list (`gpu[001-004]`); empty until nodes are allocated."""
    num_nodes: int = 0
    gpus: int | None = None
    """GPUs of the whole allocation (requested while pending); None when it has none."""
    time_limit: float | None = None
    """Seconds; None for UNLIMITED."""
    start_time: float | None = None
    """When it started, or (pending) Slurm's estimate; None when unknown."""
    end_time: float | None = None
    """When it ended, or (running) when its time limit ends it."""
    exit_code: str = ""
    stdout: str = ""
    stderr: str = ""
    work_dir: str = ""
    comment: str = ""
    partition: str = ""
    hosts: tuple[str, ...] = field(default=())
    """The allocation's hosts in order (expanded); the first runs the Ray head."""

    @property
    def waiting(self) -> bool:
        return self.state in WAITING_STATES

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def ending(self) -> bool:
        return self.state in ENDING_STATES

    @property
    def head(self) -> str | None:
        return self.hosts[0] if self.hosts else None

    @property
    def dashboard_port(self) -> int | None:
        """The port `cockpit slurm up`'s script wrote in the comment; None for other scripts."""
        found = COMMENT_PORT.search(self.comment)
        port = int(found.group(1)) if found else 0
        return port if 0 < port < 65536 else None

    @property
    def port_pending(self) -> bool:
        """A `cockpit slurm up` job whose script has not written its dashboard port yet."""
        return COMMENT_STARTING in self.comment

    @property
    def gpus_per_node(self) -> float | None:
        if self.gpus is None or self.num_nodes <= 0:
            return None
        return self.gpus / self.num_nodes

    def seconds_left(self, now: float) -> float | None:
        """Walltime left of a running job; None without a time limit."""
        if not self.running or self.end_time is None or self.time_limit is None:
            return None
        return max(0.0, self.end_time - now)

    def describe(self, now: float | None = None) -> str:
        """One line: `slurm job 123 (name) PENDING: JobHeldUser; expected start 14:05`."""
        label = f"slurm job {self.job_id}" + (f" ({self.name})" if self.name else "")
        reason = f": {self.reason}" if self.reason else ""
        if self.waiting:
            estimate = f"; expected start {clock(self.start_time, now)}" if self.start_time else ""
            return f"{label} {self.state}{reason}{estimate}"
        if self.ended:
            code = f", exit code {self.exit_code}" if self.exit_code and self.exit_code != "0:0" else ""
            return f"{label} ended: {self.state}{reason}{code}"
        if self.ending:
            return f"{label} is ending ({self.state})"
        return f"{label} {self.state}{reason}"

    def queue_line(self, now: float | None = None) -> str:
        """Short, for the status bar of a waiting job: `PENDING (Priority) · start ~14:05`."""
        reason = f" ({self.reason})" if self.reason else ""
        estimate = f" · start ~{clock(self.start_time, now)}" if self.start_time else ""
        return f"{self.state}{reason}{estimate}"

    def bootstrap_logs(self) -> list[Path]:
        """Files that say how the job's start went, readable from here before any dashboard exists: its
        Slurm output (and error) file, and `ray.sub`'s `<jobid>-logs/*.log` in the submit directory."""
        found: list[Path] = []
        for name in (self.stdout, self.stderr):
            if name and name not in ("/dev/null", "(null)") and Path(name) not in found:
                found.append(Path(name))
        if self.work_dir:
            logs = Path(self.work_dir) / f"{self.job_id}-logs"
            with contextlib.suppress(OSError):
                found.extend(sorted(p for p in logs.glob("*.log") if p.is_file()))
        return found


def clock(when: float | None, now: float | None = None) -> str:
    """`14:05`, or `Tue 14:05` beyond a day from now; `unknown` for None."""
    if when is None:
        return "unknown"
    moment = dt.datetime.fromtimestamp(when)
    today = dt.datetime.fromtimestamp(now) if now is not None else dt.datetime.now()
    if abs((moment - today).total_seconds()) < 20 * 3600:
        return moment.strftime("%H:%M")
    return moment.strftime("%a %d %b %H:%M")


def parse_fields(line: str) -> dict[str, str]:
    """`scontrol show job -o`'s `Key=Value Key=Value ...` as a dict (the first of a repeated key wins).

    A value runs to the next ` Key=`, so a job name or path with spaces stays whole.
    """
    fields: dict[str, str] = {}
    text = line.strip()
    matches = list(_FIELD.finditer(text))
    ends = [m.start() for m in matches[1:]] + [len(text)]
    for here, end in zip(matches, ends[: len(matches)], strict=True):
        fields.setdefault(here.group(1), text[here.end() : end].strip())
    return fields


def parse_job(line: str) -> SlurmJob:
    """A `SlurmJob` from one line of `scontrol show job -o`.

    Raises:
        SlurmError: the line is not a job's description.
    """
    f = parse_fields(line)
    job_id = f.get("JobId", "")
    if not job_id:
        raise SlurmError(f"scontrol printed no job description: {line[:120]!r}")
    state = f.get("JobState", "PENDING").split()[0].upper()
    node_list = _null(f.get("NodeList", ""))
    return SlurmJob(
        job_id=job_id,
        name=_null(f.get("JobName", "")),
        state=state,
        reason=_null(f.get("Reason", "")),
        node_list=node_list,
        num_nodes=_first_int(f.get("NumNodes", "")),
        gpus=_gpus(f),
        time_limit=parse_duration(f.get("TimeLimit", "")),
        start_time=parse_time(f.get("StartTime", "")),
        end_time=parse_time(f.get("EndTime", "")),
        exit_code=f.get("ExitCode", ""),
        stdout=_null(f.get("StdOut", "")),
        stderr=_null(f.get("StdErr", "")),
        work_dir=_null(f.get("WorkDir", "")),
        comment=_null(f.get("Comment", "")),
        partition=_null(f.get("Partition", "")),
    )


def _null(value: str) -> str:
    return "" if value in ("(null)", "None", "N/A", "Unknown") else value


def _first_int(text: str) -> int:
    found = re.match(r"\d+", text)
    return int(found.group()) if found else 0


def _gpus(f: dict[str, str]) -> int | None:
    """GPUs of the allocation: `gres/gpu=N` in the TRES list (typed entries like `gres/gpu:a100=N`
    repeat the same GPUs), else the per-node request times the nodes."""
    for key in ("AllocTRES", "TRES", "ReqTRES"):
        for item in f.get(key, "").split(","):
            name, _, count = item.partition("=")
            if name == "gres/gpu" and count.isdigit():
                return int(count)
    per_node = f.get("TresPerNode", "")  # gres:gpu:2, gres/gpu:a100:2 (newer), gres:gpu (one)
    for item in per_node.split(","):
        parts = re.split(r"[:/]", item)
        if len(parts) >= 2 and parts[0] == "gres" and parts[1] == "gpu":
            count = parts[-1] if len(parts) > 2 and parts[-1].isdigit() else "1"
            return int(count) * max(1, _first_int(f.get("NumNodes", "1")))
    return None


def parse_duration(text: str) -> float | None:
    """Slurm's `[D-]HH:MM:SS`, `MM:SS` or minutes as seconds; None for UNLIMITED or nothing."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A", "PARTITION_LIMIT"):
        return None
    days, _, rest = text.rpartition("-")
    try:
        parts = [int(p) for p in rest.split(":")]
        day_count = int(days) if days else 0
    except ValueError:
        return None
    if len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, minutes, seconds = (parts[0], parts[1], 0) if days else (0, parts[0], parts[1])
    elif len(parts) == 1:
        hours, minutes, seconds = (parts[0], 0, 0) if days else (0, parts[0], 0)
    else:
        return None
    return float(((day_count * 24 + hours) * 60 + minutes) * 60 + seconds)


def parse_time(text: str) -> float | None:
    """Slurm's `2026-11-26T14:05:00` (this machine's local time) as epoch seconds; None for Unknown."""
    text = text.strip()
    if not text or not text[:1].isdigit():
        return None
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def is_job_id(spec: str) -> bool:
    """`12345`, an array task `12345_7` or a het component `12345+1`, as opposed to a job name."""
    return re.fullmatch(r"\d+(?:[_+]\d+)?", spec) is not None


# -- the commands ------------------------------------------------------------------------------------


async def run(*argv: str, timeout: float = COMMAND_TIMEOUT, stdin: bytes | None = None) -> str:
    """A Slurm client command's stdout.

    Raises:
        SlurmError: not installed here, timed out, or failed (its first stderr line).
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "SLURM_TIME_FORMAT": "standard"},
        )
    except FileNotFoundError:
        raise SlurmError(
            f"Slurm's `{argv[0]}` is not installed here: run the cockpit on a login node of the Slurm "
            "cluster (or put Slurm's commands on PATH).",
            permanent=True,
        ) from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except asyncio.TimeoutError:
        await _reap(proc)
        command = " ".join(argv[:3])
        raise SlurmError(f"`{command}` did not answer within {timeout:.0f} s (slurmctld busy?).") from None
    except BaseException:  # cancelled (a new poll, `r`, quitting): the command does not outlive its asker
        await asyncio.shield(_reap(proc))
        raise
    if proc.returncode != 0:
        first = next((ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip()), "")
        raise SlurmError(f"`{' '.join(argv[:3])}` failed: {first or f'exit code {proc.returncode}'}")
    return out.decode(errors="replace")


async def _reap(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def repeated_keys(line: str) -> bool:
    """Whether a key appears twice: a job name or comment (free text, the job owner's) that imitates
    Slurm's own fields (`x JobState=RUNNING NodeList=elsewhere`)."""
    keys = [m.group(1) for m in _FIELD.finditer(line.strip())]
    return len(keys) != len(set(keys))


async def _trusted_line(job_id: str, line: str) -> tuple[str, str, str]:
    """LINE with the job's name and comment (read alone with squeue, exactly) taken out, so that text in
    them cannot pose as a field; and the name and comment.

    Raises:
        SlurmError: they cannot be read alone, or the line still repeats a key.
    """
    name = (await run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%j")).rstrip("\n")
    comment = (await run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%k")).rstrip("\n")
    comment = "" if comment == "(null)" else comment
    if name:
        line = line.replace(f" JobName={name} ", " JobName=- ", 1)
    if comment:
        line = line.replace(f" Comment={comment} ", " Comment=- ", 1)
    if repeated_keys(line):
        raise SlurmError(
            f"slurm job {job_id}'s description repeats a field: its name or comment poses as one."
        )
    return line, name, comment


async def find_job_id(spec: str) -> str:
    """The job id of SPEC: itself when it is an id, else the user's newest job of that name.

    Raises:
        SlurmError: no job of yours has that name.
    """
    if is_job_id(spec):
        return spec
    out = await run("squeue", "--me", "-h", "-t", "all", "-n", spec, "-o", "%i")
    ids = [line.strip() for line in out.splitlines() if is_job_id(line.strip())]
    if not ids:
        raise SlurmError(
            f"no Slurm job of yours is named {spec!r} (`squeue --me` lists your jobs).", permanent=True
        )
    # The newest: the highest id (submit times have one-second resolution).
    return max(ids, key=lambda i: [int(n) for n in re.split(r"[_+]", i)])


async def lookup(spec: str) -> SlurmJob:
    """The job SPEC (id or name) as Slurm sees it now, hosts expanded once it has nodes, and `squeue
    --start`'s estimate while it waits.

    Raises:
        SlurmError: Slurm's commands are missing or the job is unknown.
    """
    job_id = await find_job_id(spec)
    try:
        out = await run("scontrol", "show", "job", "-o", job_id)
    except SlurmError as exc:
        if "Invalid job id" in str(exc):
            raise SlurmError(
                f"no Slurm job {job_id} (unknown id, or it ended longer ago than Slurm remembers).",
                permanent=True,
            ) from None
        raise
    line = next((ln for ln in out.splitlines() if ln.startswith("JobId=")), "")
    if repeated_keys(line):
        line, name, comment = await _trusted_line(job_id, line)
        job = replace(parse_job(line), name=name, comment=comment)
    else:
        job = parse_job(line)
    if job.waiting and job.start_time is None:
        estimate = await _start_estimate(job.job_id)
        if estimate is not None:
            job = replace(job, start_time=estimate)
    if job.node_list and not job.ended:
        hosts = await run("scontrol", "show", "hostnames", job.node_list)
        job = replace(job, hosts=tuple(h.strip() for h in hosts.splitlines() if h.strip()))
    return job


async def _start_estimate(job_id: str) -> float | None:
    try:
        out = await run("squeue", "--start", "-h", "-j", job_id, "-o", "%S")
    except SlurmError:
        return None
    return parse_time(out.strip().splitlines()[0]) if out.strip() else None


def output_tail(job: SlurmJob, lines: int = 20, limit: int = 256 * 1024) -> list[str]:
    """The last LINES lines of the job's Slurm output file (read at most LIMIT bytes from its end), for
    a job whose head never came up; empty when it cannot be read from here."""
    if not job.stdout:
        return []
    try:
        with open(job.stdout, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            data = handle.read(limit)
    except OSError:
        return []
    text = data.decode(errors="replace").splitlines()
    return text[-lines:]
