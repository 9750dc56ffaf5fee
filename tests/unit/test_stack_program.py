"""The py-spy side of the run doctor's stacks (`cockpit.core.doctor.gather`): the program each node runs,
run here for real on a plain Python process (no Ray), and what py-spy's errors are told as."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cockpit.core.connect.programs import READ_PROGRAM, LocalProgram
from cockpit.core.doctor.gather import Dumped, Failed, _from_program, explain
from cockpit.core.doctor.stack_program import stacks_program
from cockpit.core.doctor.stacks import Member, parse_json, stack_label

PTRACE_REFUSED = (
    "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'"
)
EXITED = "Error: Failed to get process executable name. Check that the process is running."
NOT_PYTHON = "Error: Failed to find python version from target process"
"""py-spy 0.4.3's first lines for a refused ptrace, a pid that is gone, and a process that is not Python."""

GONE = 999_999_999
"""A pid no process has (above the kernel's pid_max)."""

STUCK = """\
import sys, time

def stuck_here():
    print("ready", flush=True)
    time.sleep(600)

stuck_here()
"""


# -- explain ---------------------------------------------------------------------------------------


def test_explain_says_what_to_do_when_ptrace_is_refused() -> None:
    line = explain(PTRACE_REFUSED, "1")
    assert line.startswith("py-spy may not read other processes there (kernel.yama.ptrace_scope = 1)")
    assert "sysctl kernel.yama.ptrace_scope=0" in line
    assert "\n" not in line


@pytest.mark.parametrize("scope", ["", "0"])
def test_explain_names_the_scope_only_when_it_restricts(scope: str) -> None:
    line = explain(PTRACE_REFUSED, scope)
    assert line.startswith("py-spy may not read other processes there:")
    assert "ptrace_scope =" not in line


def test_a_refusal_shown_only_in_py_spys_cause_is_a_refused_ptrace() -> None:
    """Without Yama, py-spy's first line for a refused attach is the one of an exited process; only its
    first cause says "Permission denied". The program keeps that cause, and it is told as a refusal."""
    line = explain(f"{EXITED} (Permission denied (os error 13))", "")
    assert "ptrace" in line and "exited" not in line


def test_explain_an_exited_process() -> None:
    assert explain(EXITED) == "the process has exited"


def test_explain_a_process_that_is_not_python() -> None:
    assert explain(NOT_PYTHON) == "not a Python process py-spy understands"


def test_explain_passes_an_unknown_error_through() -> None:
    unknown = "Error: Failed to merge native and python frames (Have 2 native and 1 python)"
    assert explain(unknown) == unknown
    assert explain(unknown, "1") == unknown


# -- the program, for real -------------------------------------------------------------------------


def py_spy() -> str:
    beside = Path(sys.executable).with_name("py-spy")
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("py-spy")
    if found is None:
        pytest.skip(f"py-spy is not installed (next to {sys.executable} or on PATH): pip install py-spy")
    return found


@pytest.fixture
def stuck_pid(tmp_path: Path) -> Iterator[int]:
    """A plain Python process sleeping in `stuck_here` (it says so before it sleeps)."""
    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def run_program(pids: list[int]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", READ_PROGRAM],
        input=stacks_program(pids),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def skip_if_ptrace_refused(record: dict[str, Any], scope: str) -> None:
    if "error" in record and "ptrace" in explain(record["error"], scope):
        pytest.skip(f"py-spy may not attach to processes here: {record['error']}")


def test_the_program_dumps_a_live_process_and_reports_a_gone_one(stuck_pid: int) -> None:
    spy = py_spy()
    hello, *records = run_program([stuck_pid, GONE])
    assert hello["hello"] == 1
    assert hello["py_spy"] == spy
    assert hello["uid"] == os.getuid()
    by_pid = {r["pid"]: r for r in records}
    assert sorted(by_pid) == sorted([stuck_pid, GONE])
    assert len(records) == 2
    live = by_pid[stuck_pid]
    skip_if_ptrace_refused(live, hello["ptrace_scope"])
    assert "stuck.py" in live["title"]
    stack = parse_json(json.dumps(live["threads"]), live["title"])
    assert stack.pid == stuck_pid
    assert stack_label(stack) == "in stuck_here"
    assert [f.function for f in stack.threads[0].frames] == ["stuck_here", "<module>"]
    # the program keeps only the frame fields the parser reads
    assert set(live["threads"][0]["frames"][0]) == {"name", "filename", "short_filename", "line", "module"}
    gone = by_pid[GONE]
    assert "threads" not in gone
    assert gone["error"].startswith(EXITED)  # with py-spy's first cause after it, in brackets
    assert explain(gone["error"], hello["ptrace_scope"]) == "the process has exited"


async def test_the_local_way_yields_a_stack_and_a_failure(stuck_pid: int) -> None:
    """The program as the local cluster's nodes run it: through `LocalProgram`, parsed and explained."""
    py_spy()
    members = [Member(pid=stuck_pid, node_id="n1"), Member(pid=GONE, node_id="n1")]

    async def start(program: str) -> LocalProgram:
        return await LocalProgram.start(program, sys.executable)

    events = [event async for event in _from_program("this machine", members, start, native=False)]
    dumped = [e for e in events if isinstance(e, Dumped)]
    failed = [e.failure for e in events if isinstance(e, Failed)]
    if failed and "ptrace" in failed[0].reason:
        pytest.skip(f"py-spy may not attach to processes here: {failed[0].reason}")
    assert [(d.member.pid, stack_label(d.stack)) for d in dumped] == [(stuck_pid, "in stuck_here")]
    assert "stuck.py" in dumped[0].member.title
    assert [(f.node, f.pid, f.reason) for f in failed] == [("this machine", GONE, "the process has exited")]


def test_the_program_says_when_py_spy_is_missing(tmp_path: Path) -> None:
    """A node's Python without py-spy beside it or on PATH: the hello line says so, and nothing more."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    done = subprocess.run(
        [str(python), "-c", READ_PROGRAM],
        input=stacks_program([os.getpid()]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PATH": str(python.parent)},
    )
    assert [json.loads(line)["py_spy"] for line in done.stdout.splitlines()] == [""]


def test_the_program_takes_only_integer_pids() -> None:
    program = stacks_program([12, 34], native=True)
    assert program.startswith("_PIDS = [12, 34]\n_NATIVE = True\n")
    compile(program, "<stacks>", "exec")
    with pytest.raises(ValueError):
        stacks_program(["1]; import os; os.system('x')"])  # type: ignore[list-item]


SLOW_SPY = """#!/bin/sh
# A py-spy that takes 3 s per process, leaving a mark that it ran.
echo "$@" >> "$(dirname "$0")/ran"
sleep 3
echo '[]'
"""


def _slow_venv(root: Path) -> Path:
    """A `bin/` with this Python and a slow fake py-spy beside it (the program uses the one next to it)."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    spy = bin_dir / "py-spy"
    spy.write_text(SLOW_SPY)
    spy.chmod(0o755)
    return bin_dir


def test_the_program_stops_its_py_spy_runs_when_its_reader_leaves(tmp_path: Path) -> None:
    """Closed under it (a cancelled take, a dropped channel), the program ends at once and kills the py-spy
    runs under way; the pids still queued are never dumped (each dump pauses a process)."""
    bin_dir = _slow_venv(tmp_path)
    pids = list(range(2_000_000, 2_000_016))
    proc = subprocess.Popen(
        [str(bin_dir / "python"), "-I", "-S", "-c", READ_PROGRAM],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(stacks_program(pids).encode())
        proc.stdin.close()
        hello = json.loads(proc.stdout.readline())
        assert hello["py_spy"] == str(bin_dir / "py-spy")
        proc.stdout.close()  # the reader leaves while the first runs sleep
        assert proc.wait(timeout=30) == 0  # the first finished run's write fails: it stops there
    finally:
        proc.kill()
        proc.wait()
    started = (bin_dir / "ran").read_text().splitlines()
    assert 0 < len(started) < len(pids), started
    # No fake py-spy is left running.
    leftovers = subprocess.run(["pgrep", "-f", str(bin_dir / "py-spy")], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""
