"""Provides the step anatomy chart of the Metrics screen (`p`): one row a step, a bar as long as the step's
time, split into its phases (`metrics.phases`), with a legend of each phase's share.

Each phase fills its part of the bar with its own letter on its own colour, so the bars read the same
without colour (NO_COLOR, a monochrome terminal, a text snapshot); the time no phase timer covers is `·`.
Phase names come from the log: drawn as text, never markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from cockpit.core.metrics.phases import OTHER, Anatomy, anatomy
from cockpit.core.metrics.series import SeriesStore
from cockpit.ui.widgets.safe_text import plain

COLOURS = ("red", "green", "blue", "yellow", "magenta", "cyan", "bright_red", "bright_green", "bright_blue")
OTHER_MARK = "·"
STEP_COLUMNS = 7
TOTAL_COLUMNS = 9


def letters(names: list[str]) -> dict[str, str]:
    """A distinct letter per phase: its first letter where free, else another of its letters, else any."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        if name == OTHER:
            out[name] = OTHER_MARK
            continue
        candidates = [c.upper() for c in name if c.isascii() and c.isalpha()]
        pick = next((c for c in [*candidates, *"ABCDEFGHIJKLMNOPQRSTUVWXYZ"] if c not in used), "#")
        used.add(pick)
        out[name] = pick
    return out


def render_bars(found: Anatomy, width: int, height: int) -> Text:
    """FOUND drawn in WIDTH x HEIGHT cells: a title, the legend, then a row a step (the latest last)."""
    names = [n for n in found.names if n != OTHER] + ([OTHER] if OTHER in found.names else [])
    marks = letters(names)
    styles = {
        n: "default" if n == OTHER else f"bold black on {COLOURS[i % len(COLOURS)]}"
        for i, n in enumerate(names)
    }
    title = plain(f"Step time by phase ({found.keys.framework}: {found.keys.pattern})", "bold")
    ckpt = found.checkpoints
    if ckpt is not None:
        title.append(
            f" · checkpoint {ckpt.last_seconds:.1f}s at step {ckpt.last_step}, {ckpt.share:.1%} of time, "
            f"{ckpt.steps_since} steps ago"
        )
    head = [title]
    legend = Text()
    for share in found.shares:
        item = plain(f"{share.name} {share.share:.0%}")
        if legend and len(legend) + 2 + len(item) > width:
            head.append(legend)
            legend = Text()
        legend.append(marks[share.name], style=styles[share.name])
        legend.append(" ")
        legend.append_text(item)
        legend.append("  ")
    head.append(legend)
    for line in head:
        line.truncate(width, overflow="ellipsis")
    text = Text("\n").join(head)
    lines = len(head)
    rows = max(1, height - lines)
    steps = found.steps[-rows:]
    bar_width = max(4, width - STEP_COLUMNS - TOTAL_COLUMNS)
    longest = max((s.total for s in steps), default=0.0) or 1.0
    for step in steps:
        text.append("\n")
        text.append(f"{step.step:>{STEP_COLUMNS - 1}} ", style="dim")
        cells = round(step.total / longest * bar_width)
        seconds = step.seconds()
        ordered = [n for n in names if n in seconds]
        done, drawn = 0.0, 0
        for name in ordered:
            done += seconds[name]
            end = round(done / step.total * cells) if step.total > 0 else 0
            if end > drawn:
                text.append(marks[name] * (end - drawn), style=styles[name])
                drawn = end
        text.append(" " * (bar_width - drawn))
        text.append(f" {step.total:>{TOTAL_COLUMNS - 2}.1f}s")
    return text


class PhaseBars(Widget):
    """The chart, drawn at the widget's size from the store it is given."""

    DEFAULT_CSS = "PhaseBars { height: 1fr; width: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self.store: SeriesStore | None = None

    def show(self, store: SeriesStore | None) -> None:
        self.store = store
        self.refresh()

    def render(self) -> Text:
        width, height = max(20, self.size.width), max(3, self.size.height)
        found = anatomy(self.store, last=max(1, height - 3)) if self.store is not None else None
        if found is None:
            return Text(
                "No phase timings in this job's driver log: verl's timing_s/*, NeMo RL's Timing section or "
                "RLinf's time/* keys are drawn here (p: back to the curves).",
                style="dim",
            )
        return render_bars(found, width, height)
