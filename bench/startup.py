"""Provides the start-up benchmark: what `import X` adds to a fresh `python -c pass`.

Each round runs `python -c pass` and `python -c 'import X'` for every X in fresh processes, the order
rotated every round; the cost of X is the median of its per-round difference to the same round's
`pass`, so a load spike hits both sides of a difference. One extra process per module reports which of
`ray`, `textual`, `aiohttp` and `asyncssh` the import pulled in (`sys.modules`):
`cockpit.core.connect.connection`,
what `cockpit status` loads beyond the argparse-only `cockpit.cli` (TARGET to dashboard client, aiohttp),
must pull in neither Ray nor Textual.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from typing import Any

from common import PYTHON, REPO, Row, Stats, bench_env, ratio, timed_run

NAME = "startup"
STATUS_PATH = "cockpit.core.connect.connection"
"""The commands import lazily; this is what `cockpit status` adds to the parser (results in
BENCHMARKS.md from before the `cockpit/cli/` package name `cockpit.commands`, which held every command)."""
MODULES = (STATUS_PATH, "ray", "cockpit.ui.app", "textual.app")
"""`textual.app` is not the cockpit's: it is there to compare with the reference figures."""
HEAVY = ("ray", "textual", "aiohttp", "asyncssh")

_PROBE = (
    "import importlib, json, sys; importlib.import_module(sys.argv[1]); "
    "print(json.dumps({'loaded': sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[2:])), "
    "'modules': len(sys.modules)}))"
)


def _pulled_in(module: str) -> dict[str, Any]:
    proc = subprocess.run(
        [PYTHON, "-c", _PROBE, module, *HEAVY],
        env=bench_env(),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return dict(json.loads(proc.stdout))


def run(quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    rounds = 5 if quick else 15
    env = bench_env()
    programs = {"pass": "pass", **{m: f"import {m}" for m in MODULES}}
    for code in programs.values():  # warm-up: .pyc files and the page cache
        timed_run([PYTHON, "-c", code], env)
    wall: dict[str, list[float]] = {key: [] for key in programs}
    keys = list(programs)
    for index in range(rounds):
        shift = index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            wall[key].append(timed_run([PYTHON, "-c", programs[key]], env)[0])
    net = {m: [w - p for w, p in zip(wall[m], wall["pass"], strict=True)] for m in MODULES}
    net_median = {m: statistics.median(values) for m, values in net.items()}
    loaded = {m: _pulled_in(m) for m in MODULES}
    status_clean = not ({"ray", "textual"} & set(loaded[STATUS_PATH]["loaded"]))
    ratios = {
        "ray_over_status_path": ratio(net_median["ray"], net_median[STATUS_PATH]),
        "cockpit_ui_app_over_status_path": ratio(net_median["cockpit.ui.app"], net_median[STATUS_PATH]),
    }
    doc = {
        "rounds": rounds,
        "wall_s": {key: Stats.of(values).as_dict() for key, values in wall.items()},
        "net_s": {m: Stats.of(values).as_dict() for m, values in net.items()},
        "loaded": loaded,
        "status_path_imports_neither_ray_nor_textual": status_clean,
        "ratios_of_net_medians": ratios,
    }
    rows = [Row(NAME, "python -c pass (process)", f"{Stats.of(wall['pass']).median * 1000:.0f} ms", "")]
    for m in MODULES:
        s = Stats.of(net[m])
        rows.append(
            Row(
                NAME,
                f"import {m} (minus pass)",
                f"{s.median * 1000:.0f} ms ({s.min * 1000:.0f}-{s.max * 1000:.0f})",
                f"process {Stats.of(wall[m]).median * 1000:.0f} ms; "
                f"loads {', '.join(loaded[m]['loaded']) or 'none of ' + '/'.join(HEAVY)}",
            )
        )
    rows += [
        Row(NAME, f"ratio import ray / {STATUS_PATH}", f"{ratios['ray_over_status_path']:.1f}x"),
        Row(
            NAME,
            f"ratio import cockpit.ui.app / {STATUS_PATH}",
            f"{ratios['cockpit_ui_app_over_status_path']:.1f}x",
        ),
        Row(NAME, f"{STATUS_PATH} imports no ray/textual", "yes" if status_clean else "NO"),
    ]
    return doc, rows
