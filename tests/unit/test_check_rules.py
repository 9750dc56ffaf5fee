"""`cockpit check`'s rules, from constructed and captured inputs: the node program's facts line read as
hostile JSON, each verdict with its fix (py-spy, ptrace, debugpy, GPUs, clocks, the way in), and the
lines and JSON printed. The real program runs here too, as a subprocess, with a ptrace scope file the test
writes (the kernel's own cannot be changed on a shared machine: this one has no Yama at all)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import asyncssh
import pytest
from hypothesis import given, settings

from cockpit.core.check.findings import CheckReport, Finding, render_lines, summary
from cockpit.core.check.node_program import GpuFacts, NodeFacts, node_program, parse_clock, parse_facts
from cockpit.core.check.run import ALL_FIELDS, _machines
from cockpit.core.check.verdicts import (
    MachineRun,
    clock_finding,
    debugpy_finding,
    gpu_finding,
    machine_findings,
    ptrace_finding,
    py_spy_finding,
)
from cockpit.core.check.way_in import connect_findings, dashboard_findings, fields_finding
from cockpit.core.cluster import versions
from cockpit.core.cluster.errors import (
    AuthenticationRejected,
    AuthenticationRequired,
    DashboardUnreachable,
    RequestRejected,
)
from cockpit.core.connect.programs import LocalProgram
from cockpit.core.snapshots import NodeSnapshot
from cockpit.core.ssh.errors import AuthenticationFailed, HostKeyChanged, SshError, UnknownHostKey
from cockpit.core.text import clean
from tests.harness.hostile import controls, hostile_text
from tests.harness.properties import examples

CAPTURED = {
    "hostname": "gpu-07",
    "python": "/opt/venv/bin/python",
    "python_version": "3.11.7",
    "uid": 1000,
    "py_spy": "/opt/venv/bin/py-spy",
    "py_spy_where": "beside",
    "py_spy_file_caps": False,
    "ptrace_scope": "1",
    "cap_sys_ptrace": False,
    "raylet_uids": [1000],
    "debugpy": {"version": "1.8.22", "error": ""},
    "gpus": {"vendor": "nvidia", "count": 8, "names": ["NVIDIA H100 80GB HBM3"] * 8, "error": ""},
    "attach_target": {"pid": 4242, "what": "log_monitor.py", "uid": 1000},
    "attach": {"ok": True, "error": ""},
}
"""What the program printed on a GPU node (the shape of its facts line, values of a real H100 node)."""

REFUSED = (
    "Failed to get process executable name. Check that the process is running. "
    "(Permission denied (os error 13))"
)
"""What the program makes of py-spy's words when the kernel refuses the attach (captured here: py-spy
without CAP_SYS_PTRACE against a process holding more capabilities)."""


def facts(**changes: object) -> NodeFacts:
    doc = json.loads(json.dumps(CAPTURED))
    doc.update(changes)
    parsed = parse_facts(json.dumps(doc))
    assert parsed is not None
    return parsed


# -- the facts line ------------------------------------------------------------------------------------


def test_the_facts_line_is_read_field_by_field() -> None:
    read = facts()
    assert read.hostname == "gpu-07" and read.uid == 1000 and read.raylet_uids == (1000,)
    assert read.attach_ok is True and read.attach_pid == 4242 and read.attach_what == "log_monitor.py"
    assert read.gpus == GpuFacts("nvidia", 8, ("NVIDIA H100 80GB HBM3",) * 8, "")
    assert read.debugpy_version == "1.8.22" and read.ptrace_scope == "1" and read.cap_sys_ptrace is False


def test_wrong_types_read_as_unknown_never_as_a_pass() -> None:
    odd = facts(
        uid="0", attach={"ok": "yes"}, cap_sys_ptrace=1, gpus={"count": "8"}, raylet_uids=["0", 5, True]
    )
    assert odd.uid is None and odd.attach_ok is None and odd.cap_sys_ptrace is None
    assert odd.gpus.count is None and odd.raylet_uids == (5,)
    assert ptrace_finding("n", odd).status != "pass" or "not tried" in ptrace_finding("n", odd).detail
    for junk in ("", "not json", "[1, 2]", '{"clock": 1}', '"hostname"', "{"):
        assert parse_facts(junk) is None
    assert parse_clock('{"clock": 1795642346.5}') == 1795642346.5
    for junk in ('{"clock": "1"}', '{"clock": true}', "[]", "x", '{"hostname": "a"}'):
        assert parse_clock(junk) is None


@settings(max_examples=examples(40), deadline=None)
@given(hostile_text)
def test_hostile_node_text_is_shown_as_text(text: str) -> None:
    read = facts(hostname=text, python=text, py_spy=text, attach={"ok": False, "error": text})
    run = MachineRun(f"{text} [10.0.0.7]", "node", 8.0, facts=read, clock=1.0, sent=1.0, received=1.0)
    report = CheckReport(text, tuple(machine_findings(run)))
    for line in render_lines(report, clean):
        assert not controls(line), repr(line)
    json.dumps(report.as_json())  # as is, for scripts


# -- each machine -------------------------------------------------------------------------------------


def test_py_spy_missing_fails_with_the_fix() -> None:
    found = py_spy_finding("gpu-07", facts())
    assert found.status == "pass" and "beside the workers' Python" in found.detail
    missing = py_spy_finding("gpu-07", facts(py_spy="", py_spy_where=""))
    assert missing.status == "fail" and "/opt/venv/bin/python" in missing.detail
    assert "pip install py-spy" in missing.fix
    assert ptrace_finding("gpu-07", facts(py_spy="")).status == "skip"


def test_ptrace_verdicts() -> None:
    ok = ptrace_finding("n", facts())
    assert (
        ok.status == "pass" and "log_monitor.py (pid 4242)" in ok.detail and "ptrace_scope = 1" in ok.detail
    )

    refused = ptrace_finding("n", facts(attach={"ok": False, "error": REFUSED}))
    assert refused.status == "fail" and REFUSED in refused.detail
    assert "kernel.yama.ptrace_scope=0" in refused.fix and "cap_sys_ptrace" in refused.fix

    # No Yama, the same uid: the kernel refuses a tracer that lacks capabilities its target holds.
    no_yama = ptrace_finding("n", facts(ptrace_scope="", attach={"ok": False, "error": REFUSED}))
    assert no_yama.status == "fail" and "no Yama ptrace scope, no CAP_SYS_PTRACE" in no_yama.detail
    assert "capabilities the SSH login lacks" in no_yama.fix

    locked = ptrace_finding("n", facts(ptrace_scope="3", attach={"ok": False, "error": REFUSED}))
    assert locked.status == "fail" and "until it reboots" in locked.fix

    # Ray runs as another user than the SSH login: that is what to change.
    other = ptrace_finding("n", facts(raylet_uids=[2000], attach={"ok": False, "error": REFUSED}))
    assert other.status == "fail" and "Ray runs as uid 2000" in other.detail and "uid 2000" in other.fix

    odd = ptrace_finding("n", facts(attach={"ok": False, "error": "py-spy took longer than 10 s"}))
    assert odd.status == "warn"

    # No Ray Python process to try: the kernel's rules decide.
    untried = {"attach": None, "attach_target": None}
    assert ptrace_finding("n", facts(**untried, ptrace_scope="0")).status == "pass"
    assert ptrace_finding("n", facts(**untried, ptrace_scope="")).status == "pass"
    assert ptrace_finding("n", facts(**untried, ptrace_scope="2")).status == "warn"
    assert ptrace_finding("n", facts(**untried, ptrace_scope="2", cap_sys_ptrace=True)).status == "pass"
    assert ptrace_finding("n", facts(**untried, ptrace_scope="3", cap_sys_ptrace=True)).status == "fail"


def _program_attach(spy: Path) -> dict[str, object]:
    """The node program's own `_attach` (its source as shipped) run against SPY."""
    import subprocess

    from cockpit.core.check import node_program as program

    source = program._PROGRAM
    names: dict[str, object] = {"_ATTACH_TIMEOUT": 10, "subprocess": subprocess, "time": time}
    exec(source[source.index("def _attach(spy, pid):") : source.index("def _debugpy")], names)
    attach = names["_attach"]
    assert callable(attach)
    found = attach(str(spy), 1)
    assert isinstance(found, dict)
    return found


def test_a_stop_that_races_a_thread_is_tried_once_more_and_a_refusal_is_not(tmp_path: Path) -> None:
    """py-spy stops every thread of the process; one starting or ending meanwhile fails the stop ("Failed
    to suspend process"), a race the program tries once more before it becomes a warning. A refusal is
    told at once."""
    spy, tried = tmp_path / "py-spy", tmp_path / "tried"
    spy.write_text(
        "#!/bin/sh\n"
        f"echo x >> {tried}\n"
        f"if [ $(wc -l < {tried}) -eq 1 ]; then\n"
        "  printf 'Error: Failed to get stack traces\\nCaused by:\\n0: Failed to suspend process\\n' >&2\n"
        "  exit 1\n"
        "fi\n"
        "echo 'Thread 1 (idle)'\n"
    )
    spy.chmod(0o755)
    assert _program_attach(spy) == {"ok": True, "error": ""}
    assert len(tried.read_text().splitlines()) == 2

    tried.unlink()
    spy.write_text(f"#!/bin/sh\necho x >> {tried}\necho 'Error: {REFUSED}' >&2\nexit 1\n")
    found = _program_attach(spy)
    assert found["ok"] is False and "Permission denied" in str(found["error"])
    assert len(tried.read_text().splitlines()) == 1


def test_debugpy_verdicts() -> None:
    assert debugpy_finding("n", facts()).status == "pass"
    old = debugpy_finding("n", facts(debugpy={"version": "1.6.7", "error": ""}))
    assert old.status == "warn" and "older than 1.8" in old.detail and "debugpy>=1.8" in old.fix
    error = "ModuleNotFoundError: No module named 'debugpy'"
    missing = debugpy_finding("n", facts(debugpy={"version": "", "error": error}))
    assert missing.status == "warn" and "has no debugpy" in missing.detail
    broken = debugpy_finding("n", facts(debugpy={"version": "", "error": "ImportError: libfoo.so"}))
    assert "libfoo.so" in broken.detail


def test_gpus_ray_against_the_vendor_library() -> None:
    agree = gpu_finding("n", facts(), 8.0)
    assert agree.status == "pass" and agree.detail == "8 GPUs (NVIDIA H100 80GB HBM3): Ray and NVML agree"
    fewer = gpu_finding("n", facts(), 4.0)
    assert fewer.status == "warn" and "Ray schedules 4 GPUs, NVML sees 8" in fewer.detail
    assert "--num-gpus" in fewer.fix
    none = {"vendor": "", "count": 0, "names": [], "error": "no NVIDIA or AMD GPU found (...)."}
    assert gpu_finding("n", facts(gpus=none), 0.0).status == "pass"
    logical = gpu_finding("n", facts(gpus=none), 2.0)
    assert logical.status == "warn" and "Ray schedules 2 GPUs but neither NVML nor amdsmi" in logical.detail
    unknown = gpu_finding("n", facts(gpus={"count": None, "error": "the GPU modules did not load"}), 2.0)
    assert unknown.status == "warn" and "could not be asked" in unknown.detail
    amd = {"vendor": "amd", "count": 1, "names": ["MI300X"], "error": ""}
    assert gpu_finding("n", facts(gpus=amd), 1.0).detail == "1 GPU (MI300X): Ray and amdsmi agree"


def test_clock_against_this_machines_within_the_measuring_window() -> None:
    # Read somewhere between sent and received: a slow round trip is not skew.
    assert clock_finding("n", 105.0, 100.0, 110.0).status == "pass"
    assert clock_finding("n", 99.5, 100.0, 100.2).status == "pass"
    behind = clock_finding("n", 90.0, 100.0, 100.2)
    assert behind.status == "warn" and behind.detail.startswith("10.0 s behind") and "chrony" in behind.fix
    ahead = clock_finding("n", 130.0, 100.0, 100.2)
    assert ahead.status == "warn" and ahead.detail.startswith("29.8 s ahead")
    assert clock_finding("n", 103.0, 100.0, 100.2, tolerance=5).status == "pass"
    assert clock_finding("n", None, 100.0, 100.2).status == "skip"


def test_a_machine_behind_the_head_and_its_failures() -> None:
    healthy = MachineRun("w1 [10.0.0.3]", "node", 8.0, facts=facts(), clock=5.0, sent=5.0, received=5.1)
    found = machine_findings(healthy)
    assert [f.check for f in found] == [
        "ssh from head",
        "python",
        "py-spy",
        "ptrace",
        "debugpy",
        "gpus",
        "clock",
    ]
    assert {f.status for f in found} == {"pass"}
    assert all(f.host == "w1 [10.0.0.3]" for f in found)

    head = machine_findings(MachineRun("h [10.0.0.2]", "head", 8.0, facts=facts(), clock=5.0, sent=5.0))
    assert "ssh from head" not in [f.check for f in head]

    error = "cannot connect to 10.0.0.3: [Errno 111] Connection refused"
    down = machine_findings(MachineRun("w1 [10.0.0.3]", "node", start_error=error))
    assert down[0] == Finding("ssh from head", "w1 [10.0.0.3]", "fail", error, down[0].fix)
    assert "sshd" in down[0].fix
    assert [f.status for f in down[1:]] == ["skip"] * 6

    unknown_key = "the host key of 10.0.0.3 is unknown (ssh-ed25519 SHA256:x); verify it, then ..."
    assert "--accept-new" in machine_findings(MachineRun("w", "node", start_error=unknown_key))[0].fix

    slow = machine_findings(MachineRun("w1", "node", timed_out=30.0))
    assert slow[1].status == "fail" and "within 30 s" in slow[1].detail and "--deadline" in slow[1].fix
    gone = machine_findings(MachineRun("w1", "head", reason="the cluster's Python was not found there"))
    assert gone[0].check == "python" and gone[0].status == "fail" and "not found" in gone[0].detail


def test_machines_are_nodes_by_ip_head_first() -> None:
    def node(node_id: str, ip: str, head: bool = False, state: str = "ALIVE") -> NodeSnapshot:
        return NodeSnapshot(node_id, ip, "h", head, state, "", None, None, 1.0, 2.0)

    grouped = _machines(
        [
            node("a", "10.0.0.3"),
            node("b", "10.0.0.2", True),
            node("c", "10.0.0.3"),
            node("d", "10.0.0.4", state="DEAD"),
        ]
    )
    assert [[n.node_id for n in m] for m in grouped] == [["b"], ["a", "c"]]


# -- the way in ---------------------------------------------------------------------------------------


def test_connection_failures_name_their_fix() -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    unknown = UnknownHostKey("unknown", "head-1", 2222, key, Path("/home/u/.ssh/known_hosts"))
    host_key, ssh = connect_findings("head-1", unknown)
    assert (
        host_key.status == "fail"
        and unknown.fingerprint in host_key.detail
        and "port 2222" in host_key.detail
    )
    assert "--accept-new" in host_key.fix and "/home/u/.ssh/known_hosts" in host_key.fix
    assert ssh.status == "skip"

    changed, _ = connect_findings("head-1", HostKeyChanged("the host key of head-1 CHANGED"))
    assert changed.status == "fail" and "ssh-keygen -R" in changed.fix

    key_ok, refused = connect_findings("head-1", AuthenticationFailed("head-1 refused every key"))
    assert key_ok.status == "pass" and refused.status == "fail" and "IdentityFile" in refused.fix

    _, no_answer = connect_findings("head-1", SshError("cannot connect to head-1: no answer"))
    assert no_answer.status == "fail" and "ProxyJump" in no_answer.fix

    from cockpit.core.errors import CockpitError

    (local,) = connect_findings("local", CockpitError("no local cluster is running: start one"))
    assert local == Finding("target", "local", "fail", "no local cluster is running: start one")
    waiting = CockpitError("slurm job 123 is PENDING (Resources)")
    assert connect_findings("slurm:123", waiting) == [
        Finding("target", "slurm:123", "fail", "slurm job 123 is PENDING (Resources)")
    ]


def test_token_and_dashboard() -> None:
    version = {"ray_version": "2.60.0"}
    token, dashboard = dashboard_findings("t", version, "token")
    assert (token.status, dashboard.status, dashboard.detail) == ("pass", "pass", "Ray 2.60.0 answers")
    assert dashboard_findings("t", version, "disabled")[0].status == "pass"
    exposed = dashboard_findings("t", version, "disabled", "⚠ no token auth and the dashboard listens on x")
    assert exposed[0].status == "warn" and "RAY_AUTH_MODE=token" in exposed[0].fix

    missing = dashboard_findings("t", AuthenticationRequired("401"), None)
    assert missing[0].status == "fail" and "--token-file" in missing[0].fix and missing[1].status == "skip"
    wrong = dashboard_findings("t", AuthenticationRejected("403"), "token")
    assert wrong[0].status == "fail" and "ray get-auth-token" in wrong[0].fix
    down = dashboard_findings("t", DashboardUnreachable("cannot reach the Ray dashboard"), None)
    assert down[0].status == "skip" and down[1].status == "fail" and "--dashboard-port" in down[1].fix
    odd = dashboard_findings("t", RequestRejected("refused (HTTP 500)", status=500), None)
    assert odd[1].status == "fail"

    old = dashboard_findings("t", {"ray_version": "2.30.0"}, "absent")[1]
    assert old.status == "warn" and "older than the oldest" in old.detail


def test_job_fields_against_the_profiles() -> None:
    newest = fields_finding("t", "2.60.0", [versions.LABEL_SELECTOR], [("grpo", [versions.LABEL_SELECTOR])])
    assert (
        newest.status == "pass"
        and "accepts every job field" in newest.detail
        and "the 1 profile found" in newest.detail
    )
    older = fields_finding("t", "2.47.1", ALL_FIELDS, [("grpo", [versions.CONDA_DIRECTORY])])
    assert (
        older.status == "pass" and "entrypoint_label_selector" in older.detail and "use none" in older.detail
    )
    refused = fields_finding("t", "2.47.1", ALL_FIELDS, [("grpo", [versions.LABEL_SELECTOR]), ("ppo", [])])
    assert refused.status == "warn" and "grpo uses entrypoint_label_selector" in refused.detail
    assert "ppo" not in refused.detail
    assert fields_finding("t", "?", ALL_FIELDS, []).status == "skip"
    assert set(ALL_FIELDS) >= {versions.WHEEL_WORKING_DIR, *versions.TAR_XZ_URI.values()}


# -- what is printed ------------------------------------------------------------------------------------


def test_lines_json_and_summary() -> None:
    report = CheckReport(
        "head",
        (
            Finding("ssh", "head", "pass", "connected"),
            Finding("py-spy", "w1 [10.0.0.3]", "fail", "not there", "pip install py-spy"),
            Finding("debugpy", "w1 [10.0.0.3]", "warn", "none", "pip install debugpy"),
        ),
    )
    assert render_lines(report, clean) == [
        "PASS  head           ssh      connected",
        "FAIL  w1 [10.0.0.3]  py-spy   not there — fix: pip install py-spy",
        "WARN  w1 [10.0.0.3]  debugpy  none — fix: pip install debugpy",
    ]
    assert report.failed and summary(report) == "some checks failed: 1 pass, 1 fail, 1 warn"
    doc = report.as_json()
    assert doc["ok"] is False and doc["counts"] == {"pass": 1, "fail": 1, "warn": 1, "skip": 0}
    assert doc["checks"][1] == {
        "check": "py-spy",
        "host": "w1 [10.0.0.3]",
        "status": "fail",
        "detail": "not there",
        "fix": "pip install py-spy",
    }
    assert not CheckReport("x", (Finding("a", "x", "warn", "w"), Finding("b", "x", "skip", "s"))).failed


# -- the real program, here ------------------------------------------------------------------------------


def test_the_program_compiles_with_its_gpu_modules() -> None:
    source = node_program("session_x", "/nowhere")
    compile(source, "<check>", "exec")
    assert "_SESSION = 'session_x'" in source and "class NvmlBackend" in source


def _run_program(python: str, scope_file: str) -> tuple[float | None, NodeFacts | None, float, float]:
    async def run() -> tuple[float | None, NodeFacts | None, float, float]:
        sent = time.time()
        # A session no cluster has: no process of anyone's Ray on this machine is touched.
        program = await LocalProgram.start(node_program("session_of_no_cluster", scope_file), python)
        lines = [line async for line in program.lines()]
        return parse_clock(lines[0]), parse_facts(lines[-1]), sent, time.time()

    return asyncio.run(run())


def test_the_program_reads_the_ptrace_scope_it_is_pointed_at(tmp_path: Path) -> None:
    import sys

    scope = tmp_path / "ptrace_scope"
    scope.write_text("2\n")
    clock, read, sent, received = _run_program(sys.executable, str(scope))
    assert read is not None and read.ptrace_scope == "2"
    assert clock is not None and clock_finding("here", clock, sent, received).status == "pass"
    assert read.python == sys.executable and read.uid is not None and read.hostname

    _, absent, _, _ = _run_program(sys.executable, str(tmp_path / "no-yama-here"))
    assert absent is not None and absent.ptrace_scope == ""
    assert "no Yama ptrace scope" in ptrace_finding("n", absent).detail or not absent.py_spy


def test_py_spy_missing_from_the_path_is_found_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python with no py-spy beside it and a PATH without one: the program says so (no mock: a real
    interpreter, a real PATH)."""
    import shutil
    import sys

    bare = tmp_path / "bin"
    bare.mkdir()
    python = bare / "python3"
    python.symlink_to(Path(sys.executable).resolve())
    monkeypatch.setenv("PATH", f"{bare}:/usr/bin:/bin")
    if shutil.which("py-spy", path=f"{bare}:/usr/bin:/bin"):
        pytest.skip("py-spy is installed system-wide here")
    _, read, _, _ = _run_program(str(python), str(tmp_path / "none"))
    assert read is not None and read.py_spy == ""
    found = py_spy_finding("here", read)
    assert found.status == "fail" and str(python) in found.detail


def test_no_cluster_is_one_failed_line_and_exit_1(tmp_path: Path) -> None:
    import os

    from tests.harness.run import run_cockpit

    env = {**os.environ, "COCKPIT_STATE_DIR": str(tmp_path / "no-local-cluster")}
    done = run_cockpit("check", "local", env=env)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "FAIL  local  target     no local cluster is running: start one with `cockpit local up`.",
        "SKIP  local  token      not reached",
        "SKIP  local  dashboard  not reached",
        "SKIP  local  nodes      not reached",
    ]
    assert done.stderr == "some checks failed: 1 fail, 3 skip\n"
    usage = run_cockpit("check", "local", "--deadline", "0", env=env)
    assert usage.returncode == 1 and usage.stderr == "cockpit: --deadline must be within 1..600 seconds.\n"


def test_a_machine_that_does_not_answer_holds_no_other_back() -> None:
    """Two machines at once, real programs: one answers, one hangs (a Python that reads its program and
    sleeps); the hanging one is one failed line at the deadline, the other's checks are all there, and
    the progress named the one awaited."""
    import sys

    from cockpit.core.check.run import all_machines

    told: list[str] = []

    def quick() -> object:
        return LocalProgram.start(node_program("session_of_no_cluster", "/nowhere"), sys.executable)

    def hung() -> object:
        return LocalProgram.start("import time; time.sleep(600)", sys.executable)

    machines = [("quick [10.0.0.2]", "local", (), quick), ("hung [10.0.0.3]", "local", (), hung)]
    runs = asyncio.run(all_machines(machines, 3.0, told.append))
    assert runs[0].facts is not None and runs[0].timed_out is None
    assert runs[1].facts is None and runs[1].timed_out == 3.0
    found = machine_findings(runs[1])
    assert found[0] == Finding(
        "python", "hung [10.0.0.3]", "fail", "the node's program gave no answer within 3 s", found[0].fix
    )
    assert told[0] == "0 of 2 machines answered; waiting for quick [10.0.0.2], hung [10.0.0.3]"
    assert told[-1] == "1 of 2 machines answered; waiting for hung [10.0.0.3]"
