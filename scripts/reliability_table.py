#!/usr/bin/env python3
"""Renders RELIABILITY.md from the figures the fault tests measured (tests/harness/reliability.py).

    python scripts/reliability_table.py          # bench/results/reliability.json -> RELIABILITY.md
    python scripts/reliability_table.py --run    # run the fault tests first (links cut for 60 s)

`--run` runs the fault tests (tests/integration/test_faults.py, on the multi-host harness: root and
`ip netns` needed) with COCKPIT_RELIABILITY_OUT pointing at the JSON file and COCKPIT_FAULT_CUT_S=60,
then renders the table (a fault whose test failed says so): one command reproduces it. Extra arguments
after `--` go to pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "reliability.json"
TABLE = ROOT / "RELIABILITY.md"
CUT_S = 60
TESTS = "tests/integration/test_faults.py"
EXPECTED = (
    "1-link-cut",
    "2-partition",
    "3-host-killed",
    "4-dashboard-then-head",
    "5-sshd-and-host-key",
    "6-slow-link",
)
"""The faults of issue 24, by the keys their tests record under."""

INTRO = """# Reliability

What the cockpit does when the cluster under it fails, measured by the fault tests on the multi-host
harness (network namespaces: a login side, a jump host, a head and worker hosts, each with its own
address, sshd and Ray node; `tests/harness/multihost.py`). Each row is written by the test that caused
the fault (`tests/integration/test_faults.py`); nothing here is typed by hand.

- **Time to notice**: from the fault to the cockpit saying so.
- **Time to recover**: from the end of the fault (link up, head back) to data flowing again.
- **Lines lost**: lines of a followed log (a job printing numbered lines) missing or repeated.

Reproduce (about {minutes} minutes; the link cuts last {cut} s):

    python scripts/reliability_table.py --run
"""


def seconds(value: object) -> str:
    return "-" if value is None else f"{float(value):.1f} s"  # type: ignore[arg-type]


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(document: dict[str, object]) -> str:
    faults = document.get("faults", {})
    assert isinstance(faults, dict)
    lines = [
        INTRO.format(minutes=10, cut=CUT_S),
        "| # | Fault | What the user sees | Time to notice | Time to recover | Lines lost |",
        "|---|---|---|---|---|---|",
    ]
    for key in EXPECTED:
        if key not in faults:
            lines.append(f"| {key.split('-')[0]} | {cell(key)} | not measured in this run (its test failed "
                         "or did not run) | - | - | - |")  # fmt: skip
    for key in sorted(faults):
        row = faults[key]
        lost = "-" if row.get("lines_lost") is None else str(row["lines_lost"])
        lines.append(
            f"| {cell(key.split('-')[0])} | {cell(row['fault'])} | {cell(row['user_sees'])} | "
            f"{seconds(row.get('notice_s'))} | {seconds(row.get('recover_s'))} | {lost} |"
        )
    notes = [(key, faults[key].get("notes", "")) for key in sorted(faults) if faults[key].get("notes")]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {key.split('-')[0]}: {cell(note)}" for key, note in notes]
    measured = sorted({str(row.get("measured_at", "")) for row in faults.values()} - {""})
    machine = document.get("machine", "an unknown machine")
    lines += ["", f"Measured {', '.join(measured) or '(never)'} on {machine}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", action="store_true", help="run the fault tests first (cuts of 60 s)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=TABLE)
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    status = 0
    if args.run:
        args.results.unlink(missing_ok=True)  # a fault whose test fails must not keep an old figure
        env = {**os.environ, "COCKPIT_RELIABILITY_OUT": str(args.results), "COCKPIT_FAULT_CUT_S": str(CUT_S)}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", TESTS]
        command += args.pytest_args
        status = subprocess.call(command, cwd=ROOT, env=env)
        if status:
            print(f"the fault tests failed (exit {status}): the table says what is missing", file=sys.stderr)
    try:
        document = json.loads(args.results.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.results}: {exc}", file=sys.stderr)
        return 1
    args.out.write_text(render(document))
    print(f"wrote {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
