"""Provides the Metrics screen's chart: the chosen keys against step, with a second job's overlaid.

Drawn with textual-plotext (plotext's braille lines, axes and legend in a Textual widget): a maintained
library does the axes, ticks and legend that a hand-written chart would have to get right, and a chart
of a few thousand points a key redraws in a few milliseconds (the series are thinned to `MAX_PLOTTED`
points a line before plotting). Values that are not finite (NaN, inf) are not plotted; the key list and
the status bar say where they happened. Key names come from the parser (letters, digits, `_./@-` only),
so nothing in the legend can be read as an escape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from textual_plotext import PlotextPlot

MAX_PLOTTED = 2000
"""Points a line at most (evenly picked): more than a terminal has columns of braille dots."""
COLOURS = ("cyan", "orange", "green", "magenta", "yellow", "blue", "red", "white")


@dataclass(frozen=True)
class Line:
    label: str
    points: Sequence[tuple[int, float]]
    colour: int = 0
    """Index into COLOURS: a key keeps its colour; its overlay (another job) is drawn dotted in it."""
    overlay: bool = False


def ema(points: Sequence[tuple[int, float]], weight: float) -> list[tuple[int, float]]:
    """Exponential moving average, as TensorBoard's smoothing (WEIGHT 0: none; 0.9: heavy), debiased so
    the first points are not pulled toward 0; non-finite values are skipped."""
    if weight <= 0:
        return [(s, v) for s, v in points if math.isfinite(v)]
    out = []
    last, count = 0.0, 0
    for step, value in points:
        if not math.isfinite(value):
            continue
        count += 1
        last = last * weight + (1 - weight) * value
        out.append((step, last / (1 - weight**count)))
    return out


def thin(points: Sequence[tuple[int, float]], most: int = MAX_PLOTTED) -> Sequence[tuple[int, float]]:
    if len(points) <= most:
        return points
    stride = len(points) / most
    picked = [points[int(i * stride)] for i in range(most)]
    if picked[-1] != points[-1]:
        picked[-1] = points[-1]
    return picked


MAX_PANES = 4
"""Keys drawn at once, one pane each (each its own scale: a reward of 0.5 next to 60,000 tokens/s)."""


class MetricChart(PlotextPlot):
    """The chosen keys against step, one pane a key (its overlay in the same pane). `show` replaces what
    is drawn."""

    DEFAULT_CSS = """
    MetricChart { width: 1fr; height: 1fr; min-height: 6; }
    """

    def show(self, panes: Sequence[Sequence[Line]], smoothing: float, title: str = "") -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        panes = [p for p in panes if any(line.points for line in p)][:MAX_PANES]
        if not panes:
            plt.title(title or "no metric chosen: space adds the key under the cursor")
            self.refresh()
            return
        plt.subplots(len(panes), 1)
        for row, lines in enumerate(panes, 1):
            pane = plt.subplot(row, 1)  # plotext's figure of that pane: drawn on directly
            for line in lines:
                points = thin(ema(line.points, smoothing))
                if not points:
                    continue
                colour = COLOURS[line.colour % len(COLOURS)]
                pane.plot(
                    [s for s, _ in points],
                    [v for _, v in points],
                    label=line.label,
                    color=colour,
                    marker="dot" if line.overlay else "braille",
                )
            if row == len(panes):
                pane.xlabel("step")
        self.refresh()
