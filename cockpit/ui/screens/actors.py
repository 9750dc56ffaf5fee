"""Provides the Actors screen (key 3): every actor by RL role, what died and why, and why nothing runs yet.

Counts by state and by role come from the dashboard's summary, so they are complete even when the list
is not; the line under them says "showing N of M" and which filter would narrow it. The table (the
Line-API `ActorTableView`) filters on every keystroke and sorts by any column without asking the
cluster; cursor, filter and sort stay as they are across refreshes. Above it, while something is
pending, one sentence per stuck placement group or actor says what it asks for against what the nodes
have free. Enter opens an actor's details; `l`, `g` and `n` open its log, its GPUs and its node.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter, defaultdict
from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Input, Static

from cockpit.core.actors.details import actor_details
from cockpit.core.actors.listing import ACTOR_STATES, ActorView, parse_query
from cockpit.core.actors.table import SORT_COLUMNS
from cockpit.core.errors import CockpitError
from cockpit.core.snapshots import PlacementGroupRow
from cockpit.core.units import duration
from cockpit.ui.feeds import start_worker
from cockpit.ui.messages import ActorQueryChanged, ShowActorLog, ShowGpusOf, ShowNode
from cockpit.ui.screens.base import CockpitScreen, type_into
from cockpit.ui.state import ActorTable
from cockpit.ui.widgets.actor_details import detail_pairs, details_text
from cockpit.ui.widgets.actor_table import ActorTableView, GpuMap
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.safe_text import clean, plain
from cockpit.ui.widgets.status_bar import STUCK_WARN_SECONDS
from cockpit.ui.widgets.text_line import TextLine

TICK_SECONDS = 2.0
MAX_PENDING_LINES = 5
"""Sentences shown above the table; the rest are counted ("and 3 more: cockpit actors --pending")."""


class ActorsScreen(CockpitScreen):
    TITLE = "3 Actors"
    NEEDS = frozenset({"nodes", "jobs", "gpus", "actor_list"})
    SHOWS = frozenset({"actors", "pending", "gpus"})
    AUTO_FOCUS = "#actor-table"
    BINDINGS = [
        Binding("slash", "filter", "Filter", key_display="/", id="actors.filter", show=False, priority=True,
                tooltip="filter: state:DEAD role:rollout node:HOST job:ID class:NAME or any words"),
        Binding("s", "sort", "Sort", id="actors.sort", show=False, tooltip="sort by the next column"),
        Binding("S,shift+s", "reverse", "Reverse", id="actors.reverse", show=False,
                tooltip="reverse the sort"),
        Binding("l", "log", "Its log", id="actors.log", show=False, tooltip="tail the actor's log (Logs)"),
        Binding("g", "gpus", "Its GPUs", id="actors.gpus", show=False, tooltip="its node on the GPU screen"),
        Binding("n", "node", "Its node", id="actors.node", show=False, tooltip="its node on screen 1"),
        Binding("escape", "close", "Close details / clear the filter", id="actors.close", show=False),
    ]  # fmt: skip
    DEFAULT_CSS = """
    ActorsScreen #actor-counts { height: 1; background: $boost; padding: 0 1; }
    ActorsScreen #actor-showing { height: 1; padding: 0 1; color: $text-muted; }
    ActorsScreen #actor-pending {
        height: auto; max-height: 8; padding: 0 1; display: none;
        background: $warning 15%; border-left: thick $warning;
    }
    ActorsScreen #actor-pending.shown { display: block; }
    ActorsScreen #actor-pending.never { background: $error 20%; border-left: thick $error; }
    ActorsScreen ActorTableView { height: 1fr; }
    ActorsScreen #actor-details {
        height: auto; max-height: 50%; display: none; padding: 0 1;
        border-top: solid $accent; overflow-y: auto;
    }
    ActorsScreen #actor-details.shown { display: block; }
    ActorsScreen #actor-filter { display: none; }
    ActorsScreen #actor-filter.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.details_open = False
        self._tick: Timer | None = None
        self._gpu_map: tuple[int, GpuMap, dict[str, str]] = (-1, {}, {})
        """(fleet generation, (IP, pid) -> GPUs, node id -> IP)."""
        self._placement_groups: dict[str, PlacementGroupRow | None] = {}
        """Placement groups looked up for the details pane (None: not found), for one list."""
        self._pg_table: ActorTable | None = None

    def compose_body(self) -> ComposeResult:
        yield TextLine("listing actors…", id="actor-counts")
        yield TextLine("", id="actor-showing")
        yield Static("", id="actor-pending", markup=False)
        yield ActorTableView(id="actor-table")
        yield Static("", id="actor-details", markup=False)
        yield Input(
            id="actor-filter", compact=True, placeholder="state:ALIVE role:rollout node:HOST job:ID words"
        )
        yield KeyHints(self, ActorTableView, id="actor-hint")

    @property
    def table(self) -> ActorTableView:
        return self.query_one(ActorTableView)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        if self._tick is None:
            self._tick = self.set_interval(TICK_SECONDS, self.table.tick, name="actor-ages")
        else:
            self._tick.resume()

    def on_screen_suspend(self) -> None:
        if self._tick is not None:
            self._tick.pause()

    # -- data --------------------------------------------------------------------------------------

    def refresh_view(self) -> None:
        table = self.state.actor_table
        self._show_pending()
        without = self.state.connection.without_dashboard
        if without:  # the actor list is the dashboard's (its State API)
            self.query_one("#actor-counts", TextLine).show(plain(f"actors unavailable: {without}", "bold"))
            return
        if table is None:
            error = self.state.stuck.error
            self.query_one("#actor-counts", TextLine).show(
                plain(f"listing actors failed: {error}", "bold red") if error else Text("listing actors…")
            )
            return
        if table is not self._pg_table:  # a new list: placement groups may have changed too
            self._pg_table, self._placement_groups = table, {}
        query = parse_query(self.state.actor_query)
        snapshot = self.state.snapshot
        job_ids = {j.submission_id: j.job_id for j in snapshot.jobs if j.submission_id} if snapshot else {}
        order = table.index.order(query, self.sort, self.reverse, job_ids)
        _, gpus, ip_of = self._gpus()
        empty = (
            "no actor matches the filter" if self.state.actor_query.strip() else "no actors in this cluster"
        )
        self.table.show(table.index, order, gpus, ip_of, empty_text=empty)
        self.query_one("#actor-counts", TextLine).show(self._counts_text(table))
        self.query_one("#actor-showing", TextLine).show(self._showing_text(table, len(order), query.problems))
        if self.details_open:
            self._show_details(self.table.current())

    def _gpus(self) -> tuple[int, GpuMap, dict[str, str]]:
        """Which GPUs each (IP, pid) holds, from the GPU board's last fleet; rebuilt when it changes."""
        fleet = self.state.gpu_fleet
        if fleet is None:
            return self._gpu_map
        if fleet.generation != self._gpu_map[0]:
            held: dict[tuple[str, int], list[tuple[int, float | None]]] = defaultdict(list)
            for row in fleet.rows:
                if row.gpu is None:
                    continue
                util = row.gpu.utilization
                value = None if not isinstance(util, (int, float)) else float(util)
                for process in row.gpu.processes:
                    held[(row.node.ip, process.pid)].append((row.gpu_index, value))
            ip_of = {node.node_id: node.ip for node in fleet.nodes}
            self._gpu_map = (fleet.generation, dict(held), ip_of)
        return self._gpu_map

    def _counts_text(self, table: ActorTable) -> Text:
        listing = table.listing
        text = Text(no_wrap=True, overflow="ellipsis")
        by_state = listing.by_state or Counter(v.actor.state for v in table.index.rows)
        total = sum(by_state.values())
        text.append(f"{total} actor{'s' * (total != 1)}", style="bold")
        for state in ACTOR_STATES:
            n = by_state.get(state, 0)
            if n:
                style = "green" if state == "ALIVE" else "red" if state == "DEAD" else "bold yellow"
                text.append(" · ")
                text.append(f"{n} {state}", style=style)
        by_role = table.by_role or Counter((v.role or "other") for v in table.index.rows)
        if by_role:
            text.append("  │ ", style="dim")
            text.append(" · ".join(f"{clean(role)} {n}" for role, n in by_role.items()))
        return text

    def _showing_text(self, table: ActorTable, shown: int, problems: Sequence[str]) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if problems:
            text.append(clean(problems[0]), style="bold red")
            text.append(" · ")
        listing = table.listing
        if self.state.actor_query.strip():
            text.append(f"{shown} match of {len(table.index)} listed", style="bold")
            text.append(" · ")
        text.append(clean(listing.describe()))
        arrow = "↓" if self.reverse else "↑"
        text.append(f" · sort {self.sort} {arrow}", style="dim")
        if self.state.actor_query.strip():
            text.append(" · filter ", style="dim")
            text.append(clean(self.state.actor_query.strip()), style="italic")
        text.append(f" · fetched in {table.took:.1f} s", style="dim")
        if table.memory_read_at is not None:
            text.append(
                f" · RSS read {duration(max(0.0, time.time() - table.memory_read_at))} ago", style="dim"
            )
        return text

    def _show_pending(self) -> None:
        pane = self.query_one("#actor-pending", Static)
        stuck = self.state.stuck
        report = stuck.report
        if report is None or not report.items:
            pane.remove_class("shown")
            return
        now = time.time()
        oldest = stuck.oldest(now)
        text = Text()
        text.append("Why not running", style="bold")
        text.append(f" · {len(report.items)} stuck, the oldest for {duration(oldest)}")
        if oldest >= STUCK_WARN_SECONDS:
            text.append(" (more than a minute)", style="bold")
        for item in report.items[:MAX_PENDING_LINES]:
            text.append("\n")
            text.append(
                "✖ " if item.infeasible else "… ", style="bold red" if item.infeasible else "bold yellow"
            )
            text.append(clean(item.sentence))
        if len(report.items) > MAX_PENDING_LINES:
            text.append(
                f"\nand {len(report.items) - MAX_PENDING_LINES} more: cockpit actors TARGET --pending"
            )
        for warning in report.warnings[:1]:
            text.append("\n")
            text.append(clean(warning), style="dim")
        pane.update(text)
        pane.add_class("shown")
        pane.set_class(any(item.infeasible for item in report.items), "never")

    # -- details -----------------------------------------------------------------------------------

    @on(ActorTableView.Chosen)
    def _chosen(self, event: ActorTableView.Chosen) -> None:
        self.details_open = not self.details_open
        self.query_one("#actor-details", Static).set_class(self.details_open, "shown")
        if self.details_open:
            self._show_details(event.view)

    @on(ActorTableView.CursorMoved)
    def _cursor_moved(self, event: ActorTableView.CursorMoved) -> None:
        if self.details_open:
            self._show_details(event.view)

    def _show_details(self, view: ActorView | None) -> None:
        pane = self.query_one("#actor-details", Static)
        if view is None:
            pane.update(Text("no actor under the cursor", style="dim"))
            return
        actor = view.actor
        snapshot = self.state.snapshot
        node = next((n for n in snapshot.nodes if n.node_id == actor.node_id), None) if snapshot else None
        pg_id = actor.placement_group_id
        if pg_id and pg_id not in self._placement_groups:
            self._placement_groups[pg_id] = None
            start_worker(
                self.app,
                functools.partial(self._fetch_pg, pg_id),
                group="actor-pg",
                description="Looking up a placement group",
                exclusive=True,  # the cursor moved on: only the last actor's group is worth asking for
            )
        _, gpus, ip_of = self._gpus()
        held = gpus.get((ip_of.get(actor.node_id, ""), actor.pid or -1), ()) if actor.pid else ()
        details = actor_details(view, node=node, placement_group=self._placement_groups.get(pg_id), gpus=held)
        pane.update(details_text(detail_pairs(details)))

    async def _fetch_pg(self, pg_id: str) -> None:
        try:
            await self._look_up_pg(pg_id)
        except asyncio.CancelledError:
            self._placement_groups.pop(pg_id, None)  # the cursor moved on: asked again when shown again
            raise

    async def _look_up_pg(self, pg_id: str) -> None:
        try:
            client = await self.host.dashboard()
            listing = await client.placement_groups(filters=[("placement_group_id", "=", pg_id)], limit=1)
        except CockpitError:
            self._placement_groups.pop(pg_id, None)  # tried again when the details are shown next
            return
        self._placement_groups[pg_id] = listing.rows[0] if listing.rows else None
        if self.details_open:
            self._show_details(self.table.current())

    # -- filter and sort ---------------------------------------------------------------------------

    def action_filter(self) -> None:
        """`/` is a priority binding: it runs when the app reads the key, so the filter has focus before
        the keys typed right behind it are handed out (`/role` typed fast or pasted would otherwise
        reach the table, and its `l` jump to the Logs screen). A `/` typed in the filter is a `/`."""
        field = self.query_one("#actor-filter", Input)
        if field.has_focus:
            type_into(field, "slash", "/")
            return
        field.value = self.state.actor_query
        field.add_class("shown")
        self.set_focus(field)

    @on(Input.Changed, "#actor-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.state.actor_query = event.value
        self.refresh_view()
        self.post_message(ActorQueryChanged())

    @on(Input.Submitted, "#actor-filter")
    def _filter_done(self) -> None:
        self.query_one("#actor-filter", Input).remove_class("shown")
        self.table.focus()

    def action_close(self) -> None:
        field = self.query_one("#actor-filter", Input)
        if field.has_class("shown"):
            field.remove_class("shown")
            self.table.focus()
            return
        if self.details_open:
            self.details_open = False
            self.query_one("#actor-details", Static).remove_class("shown")
            return
        if self.state.actor_query:
            field.value = ""  # Input.Changed clears the filter

    @property
    def sort(self) -> str:
        """The column sorted by: kept in the state, where the feed reads it to sort the next list so."""
        return self.state.actor_sort[0]

    @property
    def reverse(self) -> bool:
        return self.state.actor_sort[1]

    def action_sort(self) -> None:
        column = SORT_COLUMNS[(SORT_COLUMNS.index(self.sort) + 1) % len(SORT_COLUMNS)]
        self.state.actor_sort = (column, self.reverse)
        self.refresh_view()

    def action_reverse(self) -> None:
        self.state.actor_sort = (self.sort, not self.reverse)
        self.refresh_view()

    # -- jumps -------------------------------------------------------------------------------------

    def _placed(self, what: str) -> ActorView | None:
        """The actor under the cursor if it runs somewhere (else a one-line warning, and None)."""
        view = self.table.current()
        if view is None:
            self.notify(f"no actor under the cursor to show {what} of", severity="warning")
        elif not view.actor.node_id:
            self.notify(f"this actor is not placed on a node yet: no {what} to show", severity="warning")
            return None
        return view

    def action_log(self) -> None:
        if view := self._placed("log"):
            self.post_message(ShowActorLog(view.actor))

    def action_gpus(self) -> None:
        if view := self._placed("GPUs"):
            self.post_message(ShowGpusOf(view.actor.node_id))

    def action_node(self) -> None:
        if view := self._placed("node"):
            self.post_message(ShowNode(view.actor.node_id))
