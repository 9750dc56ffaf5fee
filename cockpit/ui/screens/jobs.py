"""Provides the Jobs screen (key 4): the cluster's jobs, and launching, stopping, deleting, resubmitting."""

from __future__ import annotations

import json
import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from cockpit.core.errors import CockpitError
from cockpit.core.jobs.profiles import Profile
from cockpit.core.jobs.submitted import noted_profile
from cockpit.core.snapshots import JobRow
from cockpit.core.units import ago, duration
from cockpit.ui.messages import RefreshRequested, ShowJobLog
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.launcher import LaunchScreen
from cockpit.ui.widgets.jobs_strip import STATUS_STYLE
from cockpit.ui.widgets.key_hints import KeyHints, key_of
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.safe_text import clean, plain

COLUMNS = (
    ("job", "Job"),
    ("status", "Status"),
    ("entrypoint", "Entrypoint"),
    ("started", "Started"),
    ("duration", "Duration"),
    ("driver", "Driver node"),
    ("message", "Message"),
)


def short_entrypoint(entrypoint: str, width: int = 48) -> str:
    """The part a user recognises: drop interpreter paths, keep the module or script and the start."""
    words = entrypoint.split()
    if words and "/" in words[0] and words[0].rsplit("/", 1)[-1].startswith("python"):
        words[0] = words[0].rsplit("/", 1)[-1]
    text = " ".join(words)
    return text if len(text) <= width else text[: width - 1] + "…"


def job_cells(job: JobRow, now: float) -> dict[str, Text]:
    """The cells of one job's row, by column key: all `Text`, since a `str` cell is read as markup and
    every string here but the times came from the cluster."""
    end = job.end_time or now
    return {
        "job": plain(job.key),
        "status": plain(job.status, STATUS_STYLE.get(job.status, "")),
        "entrypoint": plain(short_entrypoint(clean(job.entrypoint))),
        "started": Text(ago(now - job.start_time) if job.start_time else "-"),
        "duration": Text(duration(end - job.start_time) if job.start_time else "-"),
        "driver": plain(job.driver_node_id[:8]),
        "message": plain(" ".join(clean(job.message).split())[:80]),
    }


def recorded_overrides(text: str) -> tuple[str, ...] | None:
    """The extra overrides a job's metadata recorded (`cockpit_overrides`, a JSON list of strings), or
    None when it is anything else."""
    try:
        items = json.loads(text)
    except ValueError:
        return None
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        return None
    return tuple(items)


class JobsScreen(CockpitScreen):
    TITLE = "4 Jobs"
    NEEDS = frozenset({"nodes", "jobs"})
    # Shown in the screen's own hint line and in `?` help, not the footer: at 80 columns the footer must
    # keep the navigation keys, `?` and `q` visible.
    BINDINGS = [
        Binding("n", "launch", "New job", id="jobs.new", show=False),
        Binding("s", "stop", "Stop", id="jobs.stop", show=False),
        Binding("d", "delete", "Delete", id="jobs.delete", show=False),
        Binding("r,e", "resubmit", "Resubmit with edits", id="jobs.resubmit", show=False),
        Binding("enter", "driver_log", "Driver log", id="jobs.log", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="jobs-table")
        yield KeyHints(self, id="jobs-hint")

    def refresh_view(self) -> None:
        snapshot = self.state.snapshot
        table = self.query_one("#jobs-table", KeyedTable)
        table.set_class(self.state.connection.stale, "stale")
        hint = self.query_one("#jobs-hint", KeyHints)
        without = self.state.connection.without_dashboard
        if without:  # the jobs API is the dashboard's: say why there is no list, not "no jobs yet"
            hint.show(plain(f"jobs unavailable: {without}", "bold"))
        if snapshot is None:
            return
        now = time.time()
        keys = [job.key for job in snapshot.jobs]
        table.show_rows((job.key, job_cells(job, now)) for job in snapshot.jobs)  # newest first
        if without:
            return
        hint.show(
            Text.assemble(
                "no jobs yet: press ",
                (key_of(self.app, self, "jobs.new"), "bold"),
                " to launch one from a profile",
            )
            if not keys
            else hint.keys_text()
        )

    def current_job(self) -> JobRow | None:
        key = self.query_one("#jobs-table", KeyedTable).current_key()
        snapshot = self.state.snapshot
        if snapshot is None or key is None:
            return None
        return next((j for j in snapshot.jobs if j.key == key), None)

    # -- actions -------------------------------------------------------------------------------

    def action_launch(
        self, preselect: str | None = None, overrides: tuple[str, ...] = (), noted: Profile | None = None
    ) -> None:
        def launched(submission_id: str | None) -> None:
            if submission_id:
                self.notify(clean(f"submitted {submission_id}"), markup=False)
                self.post_message(RefreshRequested())

        self.app.push_screen(LaunchScreen(preselect, overrides, noted=noted), launched)

    def action_resubmit(self) -> None:
        job = self.current_job()
        if job is None:
            return
        profile = job.metadata.get("cockpit_profile")
        if not profile:
            self.notify("this job was not launched from a profile; press n to pick one", severity="warning")
            return
        overrides = recorded_overrides(job.metadata.get("cockpit_overrides", "[]"))
        if overrides is None:
            self.notify(
                "this job's recorded overrides cannot be read back (not a JSON list of strings); "
                "press n to pick the profile",
                severity="warning",
            )
            return
        # Anyone who can submit can write a job's metadata: these go to the launcher as typed, where the
        # same parser as the command line refuses a ${env:...} secret; nothing here is ever resolved.
        self.action_launch(profile, overrides, noted=resubmitted_profile(job, profile))

    def action_stop(self) -> None:
        job = self.current_job()
        if job is None:
            return
        if job.terminal:
            self.notify(clean(f"{job.key} already ended ({job.status})"), severity="warning", markup=False)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._job_call("stop", job.key)

        question = Text.assemble("Stop job ", plain(job.key, "bold"), "?")
        self.app.push_screen(ConfirmScreen(question, "Stop"), answered)

    def action_delete(self) -> None:
        job = self.current_job()
        if job is None:
            return
        if not job.terminal:
            self.notify("only finished jobs can be deleted: stop it first (s)", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._job_call("delete", job.key)

        question = Text.assemble("Delete job ", plain(job.key, "bold"), " and its record on the cluster?")
        self.app.push_screen(ConfirmScreen(question, "Delete"), answered)

    @work(group="job-action", exit_on_error=False, description="Stopping or deleting a job")
    async def _job_call(self, verb: str, job_id: str) -> None:
        try:
            client = await self.host.dashboard()
            if verb == "stop":
                await client.stop_job(job_id)
            else:
                await client.delete_job(job_id)
        except CockpitError as exc:
            self.notify(clean(f"{verb} {job_id} failed: {exc}"), severity="error", markup=False)
            return
        self.notify(clean(f"{job_id}: {'stop requested' if verb == 'stop' else 'deleted'}"), markup=False)
        self.post_message(RefreshRequested())

    def action_driver_log(self) -> None:
        job = self.current_job()
        if job is not None:
            self.post_message(ShowJobLog(job))

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_driver_log()


def resubmitted_profile(job: JobRow, name: str) -> Profile | None:
    """The profile file JOB was submitted from here (`jobs.submitted.noted_profile`), for its resubmit;
    None where none is noted or it no longer loads (the launcher then offers the name's)."""
    try:
        return noted_profile(job.submission_id, name)
    except (CockpitError, OSError, ValueError):
        return None
