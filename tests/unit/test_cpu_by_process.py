"""scripts/cpu_by_process.py: CPU charged to the kind of process that spent it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu_by_process.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cpu_by_process", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT_TICK = os.sysconf("SC_CLK_TCK")
SPIN = "import time\nend = time.process_time() + 0.8\nwhile time.process_time() < end: pass\ntime.sleep(30)"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / SCRIPT_TICK


def test_a_process_started_between_looks_is_charged_all_its_cpu_to_its_kind() -> None:
    script = load()
    sampler = script.Sampler()
    sampler.look()  # what ran before is the baseline, charged nothing
    busy = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        sampler.look()  # seen new: charged what it spent so far
        deadline = time.monotonic() + 60
        while cpu_seconds(busy.pid) < 0.75 and time.monotonic() < deadline:
            time.sleep(0.05)
        sampler.look()  # seen again: charged the difference
        spent = cpu_seconds(busy.pid)
    finally:
        busy.kill()
        busy.wait()
    kind = sampler.seen[busy.pid][2]
    assert kind.startswith("other: python"), kind  # `python -c ...`: none of the known kinds
    charged = sampler.ticks[kind] / SCRIPT_TICK
    assert charged >= spent - 0.02, (charged, spent)
    report = sampler.report()
    assert report["kinds"][kind]["processes"] >= 1
    assert report["placed_cpu_s"] >= spent - 0.02 and report["busy_cpu_s"] >= 0.7


def test_kinds_by_name_and_command_line() -> None:
    script = load()
    assert script.kind_of("0", "ray::RolloutWorker") == "ray worker ray::RolloutWorker"
    assert script.kind_of("0", "raylet") == "raylet"
    assert script.kind_of("0", "bash") == "other: bash"  # pid 0 has no command line: by its name
