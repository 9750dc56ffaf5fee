"""Provides the Metrics screen (key 7): a job's training curves from its driver log, no browser needed.

Left, every key seen, filtered as you type (`/`), each with a sparkline, its last, min and max (red
when it went NaN or infinite); right, the chosen keys against step. Space adds or removes the key under
the cursor (the defaults are what the framework's users watch first: reward or score, KL, response
length, throughput); `s` cycles the smoothing (none, EMA 0.6, 0.9); `c` overlays another run of the same
profile (again: the next one; `C` removes it); `j` follows another job; `p` shows instead each step's
time split into its phases (generation, log-probs, update, weight sync, checkpoint: `PhaseBars`).
Above, the step, the time per step over the latest steps and the rate since the job started.
"""

from __future__ import annotations

import math
import time

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Static

from cockpit.core.metrics.series import SeriesStore, Summary, format_value
from cockpit.core.snapshots import JobRow
from cockpit.core.units import duration
from cockpit.ui.screens.base import CockpitScreen
from cockpit.ui.state import MetricsView
from cockpit.ui.widgets.gpu_cells import sparkline
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.keyed_table import KeyedTable
from cockpit.ui.widgets.metric_chart import Line, MetricChart
from cockpit.ui.widgets.phase_bars import PhaseBars
from cockpit.ui.widgets.safe_text import clean, plain

SMOOTHING = (0.0, 0.6, 0.9)
DEFAULT_KEYS = (
    "reward",
    "critic/score/mean",
    "critic/rewards/mean",
    "train/reward",
    "kl",
    "actor/kl_loss",
    "actor/ppo_kl",
    "train/kl_penalty",
    "response_length/mean",
    "throughput",
    "perf/throughput",
)
"""What users of each framework watch first (the demo's, verl's, NeMo RL's names), in that order."""
MAX_DEFAULT = 3
SPARK_POINTS = 16


def default_keys(keys: list[str]) -> list[str]:
    chosen = [k for k in DEFAULT_KEYS if k in keys][:MAX_DEFAULT]
    return chosen or keys[:1]


def draw_chart(chart: MetricChart, view: MetricsView) -> None:
    """The chosen keys of VIEW (the defaults when none was chosen) on CHART, the compared job's dotted."""
    store = view.store
    if not view.keys and store is not None and store.keys():
        view.keys = default_keys(store.keys())
    panes: list[list[Line]] = []
    for colour, key in enumerate(view.keys):
        lines = []
        series = store.get(key) if store is not None else None
        if series is not None:
            lines.append(Line(key, series.points(), colour))
        other = view.compare_store.get(key) if view.compare_store is not None else None
        if other is not None and view.compare is not None:
            lines.append(Line(f"{key} ({view.compare.key[-8:]})", other.points(), colour, overlay=True))
        panes.append(lines)
    title = clean(view.job.key) if view.job is not None else ""
    chart.show(panes, view.smoothing, title)


def spark(store: SeriesStore, key: str) -> str:
    """The key's last SPARK_POINTS kept values as a sparkline, scaled between their own min and max."""
    series = store.get(key)
    if series is None:
        return ""
    values = [v for _, v in series.points()[-SPARK_POINTS:]]
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = high - low or 1.0
    return sparkline([None if not math.isfinite(v) else int((v - low) / span * 100) for v in values])


COLUMNS = (
    ("on", ""),
    ("key", "Key"),
    ("spark", "Recent"),
    ("last", "Last"),
    ("min", "Min"),
    ("max", "Max"),
)


def key_cells(summary: Summary, store: SeriesStore, chosen: bool) -> dict[str, Text]:
    """One key's row, by column key; the key came from the job's log (shown as text, never markup)."""
    bad = summary.nonfinite is not None and summary.nonfinite.now
    style = "bold red" if bad else ("bold" if chosen else "")
    mark = "●" if chosen else " "
    lowest = "-" if summary.minimum is None else format_value(summary.minimum)
    highest = "-" if summary.maximum is None else format_value(summary.maximum)
    return {
        "on": Text(mark, style="cyan"),
        "key": plain(summary.key, style),
        "spark": Text(spark(store, summary.key), style="green"),
        "last": plain(format_value(summary.last)[:10], "red" if not math.isfinite(summary.last) else ""),
        "min": plain(lowest[:10], "dim"),
        "max": plain(highest[:10], "dim"),
    }


def pace(view_times: list[tuple[float, int]], job: JobRow | None, last_step: int | None) -> str:
    """`step 812 · 3.1 s/step (latest) · 3.4 s/step since the start`."""
    parts = []
    if last_step is not None:
        parts.append(f"step {last_step}")
    if len(view_times) >= 2:
        (t0, s0), (t1, s1) = view_times[0], view_times[-1]
        if s1 > s0 and t1 > t0:
            parts.append(f"{(t1 - t0) / (s1 - s0):.1f} s/step (latest)")
    if job is not None and job.start_time and last_step and job.status == "RUNNING":
        elapsed = time.time() - job.start_time
        if elapsed > 0:
            parts.append(f"{elapsed / last_step:.1f} s/step since the start ({duration(elapsed)})")
    return " · ".join(parts)


class MetricsScreen(CockpitScreen):
    TITLE = "7 Metrics"
    NEEDS = frozenset({"nodes", "jobs"})
    SHOWS = frozenset({"metrics", "connection"})
    BINDINGS = [
        Binding("space", "toggle_key", "Chart key", id="metrics.toggle", show=False),
        Binding("slash", "filter", "Filter", key_display="/", id="metrics.filter", show=False),
        Binding("s", "smoothing", "Smoothing", id="metrics.smoothing", show=False),
        Binding("c", "compare", "Compare", id="metrics.compare", show=False),
        Binding("C", "no_compare", "No compare", id="metrics.no_compare", show=False),
        Binding("j", "next_job", "Next job", id="metrics.next_job", show=False),
        Binding("p", "phases", "Step phases", id="metrics.phases", show=False),
        Binding("escape", "clear_filter", "Clear filter", id="metrics.clear_filter", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        yield Static(id="metrics-summary")
        with Horizontal(id="metrics-body"):
            with Vertical(id="metrics-left"):
                yield Input(placeholder="filter keys (/)", id="metrics-filter")
                yield KeyedTable(COLUMNS, id="metric-keys")
            yield MetricChart(id="metric-chart")
            yield PhaseBars(id="metric-phases")
        yield KeyHints(self, id="metrics-hint")

    def on_mount(self) -> None:
        self.query_one("#metrics-filter", Input).display = False
        self.query_one("#metric-phases", PhaseBars).display = False

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one("#metric-keys", KeyedTable).focus()

    # -- drawing -------------------------------------------------------------------------------

    def refresh_view(self) -> None:
        view = self.state.metrics
        store = view.store
        summary = Text(no_wrap=True, overflow="ellipsis")
        if view.job is None:
            summary.append("No job yet: the newest running job's driver log is read here.", style="bold")
        else:
            summary.append_text(plain(view.job.key, "bold"))
            summary.append_text(plain(f" · {view.job.status.lower()}", "dim"))
            if store is not None:
                line = pace(list(view.step_times), view.job, store.last_step)
                if line:
                    summary.append(f" · {line}")
                summary.append_text(plain(f" · {len(store)} keys · format {view.form}", "dim"))
            if not view.loaded:
                summary.append(" · reading the driver log…", style="yellow")
            if view.compare is not None:
                summary.append_text(plain(f" · compared with {view.compare.key} (dotted)", "magenta"))
            if view.smoothing:
                summary.append(f" · EMA {view.smoothing:g}", style="cyan")
        for alarm in view.alarms[:2]:
            summary.append("\n")
            summary.append_text(plain(f"✖ {alarm.line}", "bold red"))
        if view.error:
            summary.append("\n")
            summary.append_text(plain(view.error, "yellow"))
        self.query_one("#metrics-summary", Static).update(summary)
        if store is None:
            self.query_one("#metric-chart", MetricChart).show([], view.smoothing)
            return
        keys = store.keys()
        if not view.keys and keys:
            view.keys = default_keys(keys)
        wanted = self.query_one("#metrics-filter", Input).value.strip().lower()
        shown = [k for k in keys if wanted in k.lower()] if wanted else keys
        summaries = {s.key: s for s in store.summaries()}
        self.query_one("#metric-keys", KeyedTable).show_rows(
            (key, key_cells(summaries[key], store, key in view.keys)) for key in shown
        )
        self._draw_chart()

    def _draw_chart(self) -> None:
        bars = self.query_one("#metric-phases", PhaseBars)
        if bars.display:
            bars.show(self.state.metrics.store)
            return
        draw_chart(self.query_one("#metric-chart", MetricChart), self.state.metrics)

    # -- actions -------------------------------------------------------------------------------

    def action_toggle_key(self) -> None:
        key = self.query_one("#metric-keys", KeyedTable).current_key()
        if key is None:
            return
        keys = self.state.metrics.keys
        if key in keys:
            keys.remove(key)
        else:
            keys.append(key)
        self.refresh_view()

    @on(DataTable.RowSelected, "#metric-keys")
    def _row_selected(self) -> None:
        self.action_toggle_key()

    def action_smoothing(self) -> None:
        view = self.state.metrics
        view.smoothing = (
            SMOOTHING[(SMOOTHING.index(view.smoothing) + 1) % len(SMOOTHING)]
            if view.smoothing in SMOOTHING
            else 0.0
        )
        self.notify(f"smoothing: {'none' if not view.smoothing else f'EMA {view.smoothing:g}'}", timeout=2)
        self._draw_chart()
        self.refresh_view()

    def action_phases(self) -> None:
        """The curves, or each step's time split into its phases."""
        bars = self.query_one("#metric-phases", PhaseBars)
        bars.display = not bars.display
        self.query_one("#metric-chart", MetricChart).display = not bars.display
        self._draw_chart()

    def action_filter(self) -> None:
        box = self.query_one("#metrics-filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#metrics-filter", Input)
        box.value = ""
        box.display = False
        self.query_one("#metric-keys", KeyedTable).focus()
        self.refresh_view()

    @on(Input.Changed, "#metrics-filter")
    def _filter_changed(self) -> None:
        self.refresh_view()

    @on(Input.Submitted, "#metrics-filter")
    def _filter_done(self) -> None:
        self.query_one("#metric-keys", KeyedTable).focus()

    def _same_profile(self) -> list[JobRow]:
        """Other jobs of the followed job's profile, newest first (those with a driver log)."""
        view = self.state.metrics
        snapshot = self.state.snapshot
        if view.job is None or snapshot is None:
            return []
        profile = view.job.metadata.get("cockpit_profile", "")
        others = [
            j
            for j in snapshot.jobs
            if j.key != view.job.key
            and j.submission_id
            and j.driver_node_id
            and (not profile or j.metadata.get("cockpit_profile", "") == profile)
        ]
        return sorted(others, key=lambda j: j.start_time or 0.0, reverse=True)

    def action_compare(self) -> None:
        feed = getattr(self.app, "metrics_feed", None)
        others = self._same_profile()
        if feed is None or not others:
            self.notify("no other run of this job's profile to compare with", severity="warning")
            return
        current = self.state.metrics.compare
        keys = [j.key for j in others]
        at = keys.index(current.key) if current is not None and current.key in keys else -1
        chosen = others[(at + 1) % len(others)]
        feed.compare(chosen)
        self.notify(clean(f"comparing with {chosen.key} (dotted lines; C: stop)"), timeout=4, markup=False)

    def action_no_compare(self) -> None:
        feed = getattr(self.app, "metrics_feed", None)
        if feed is not None:
            feed.compare(None)

    def action_next_job(self) -> None:
        feed = getattr(self.app, "metrics_feed", None)
        snapshot = self.state.snapshot
        view = self.state.metrics
        jobs = sorted(
            (j for j in (snapshot.jobs if snapshot else ()) if j.submission_id and j.driver_node_id),
            key=lambda j: j.start_time or 0.0,
            reverse=True,
        )
        if feed is None or not jobs:
            self.notify("no job with a driver log", severity="warning")
            return
        keys = [j.key for j in jobs]
        at = keys.index(view.job.key) if view.job is not None and view.job.key in keys else -1
        chosen = jobs[(at + 1) % len(jobs)]
        view.chosen = chosen.key
        feed.follow(chosen)
        self.notify(clean(f"metrics of {chosen.key}"), timeout=3, markup=False)
