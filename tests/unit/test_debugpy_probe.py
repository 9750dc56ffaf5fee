"""The debugpy side of post-mortem debugging, without a cluster: the pre-flight probe's pure parts
(`cockpit.core.jobs.debugpy_probe`), and what a debug session hands to VS Code or runs in a paused worker
(`cockpit.core.debug.session.vscode_attach`, `REPAUSE`)."""

from __future__ import annotations

import ast
import json

import pytest

from cockpit.core.debug.dap import Frame
from cockpit.core.debug.session import DISARM, REPAUSE, REPAUSE_CHECK, vscode_attach
from cockpit.core.jobs.debugpy_probe import FIX, _declares_debugpy, interpreter_of, verdict

# -- interpreter_of --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entrypoint", "python"),
    [
        ("/venv/bin/python -m x", "/venv/bin/python"),
        ("/opt/venv/bin/python3.11 train.py --lr 1e-4", "/opt/venv/bin/python3.11"),
        ("python3 -m verl.trainer.main_ppo data.train_batch_size=8", "python3"),
        ("python workload.py", "python"),
        ("'/path with space/bin/python' run.py", "/path with space/bin/python"),
        ("uv run x.py", "python"),
        ("bash run.sh", "python"),
        ("ipython x.py", "python"),
        ("/usr/bin/env python3 x.py", "python"),
        ("", "python"),
        ("   ", "python"),
        ("python3 -c 'unbalanced", "python"),
        ('"/venv/bin/python -m x', "python"),
    ],
)
def test_interpreter_of(entrypoint: str, python: str) -> None:
    assert interpreter_of(entrypoint) == python


# -- verdict ---------------------------------------------------------------------------------------


def test_verdict_ok_on_a_version_line() -> None:
    log = "2026-11-25 21:25:07,342 INFO worker.py:1 -- Connecting to Ray\nCOCKPIT_DEBUGPY 1.8.22\n"
    check = verdict(log)
    assert check.status == "ok"
    assert "1.8.22" in check.detail
    assert not check.blocking


@pytest.mark.parametrize("version", ["1.10.0", "2.0.1", "1.8"])
def test_verdict_compares_versions_as_numbers(version: str) -> None:
    assert verdict(f"COCKPIT_DEBUGPY {version}").status == "ok"


def test_verdict_fails_on_an_old_debugpy() -> None:
    check = verdict("COCKPIT_DEBUGPY 1.7.0\n")
    assert check.status == "fail"
    assert check.blocking
    assert "1.7.0" in check.detail
    assert "older than 1.8" in check.detail
    assert FIX in check.detail


@pytest.mark.parametrize(
    "log",
    [
        "Traceback (most recent call last):\nModuleNotFoundError: No module named 'debugpy'\n",
        "ray.exceptions.RayTaskError: ImportError: No module named debugpy",
    ],
)
def test_verdict_fails_without_debugpy(log: str) -> None:
    check = verdict(log)
    assert check.status == "fail"
    assert "no debugpy" in check.detail
    assert FIX in check.detail
    assert "pip install 'debugpy>=1.8'" in check.detail


def test_verdict_warns_when_the_probe_said_nothing() -> None:
    check = verdict("")
    assert check.status == "warn"
    assert not check.blocking
    assert "no output" in check.detail


def test_verdict_warns_with_the_last_line() -> None:
    check = verdict("starting\nJob supervisor actor died: node lost\n\n  \n")
    assert check.status == "warn"
    assert "Job supervisor actor died: node lost" in check.detail
    assert len(verdict("x" * 1000).detail) < 250  # a long line is cut


# -- _declares_debugpy -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "packages",
    [
        ["torch", "debugpy>=1.8"],
        ["  debugpy"],
        ["debugpy==1.8.22"],
        {"packages": ["numpy", "debugpy>=1.8.0"], "pip_check": False},
    ],
)
def test_declares_debugpy(packages: object) -> None:
    assert _declares_debugpy(packages)


@pytest.mark.parametrize(
    "packages",
    [
        None,
        [],
        ["numpy", "torch"],
        ["debugpyx"],
        "debugpy",  # a requirements file path or a bare string: cannot tell
        "requirements.txt",
        {"packages": "debugpy"},
        {"pip_check": False},
        [1, None, {"debugpy": "1.8"}],
        42,
    ],
)
def test_does_not_declare_debugpy(packages: object) -> None:
    assert not _declares_debugpy(packages)


@pytest.mark.parametrize("packages", [["debugpy==1.6.7"], ["debugpy<1.8"]])
def test_an_old_pinned_debugpy_is_not_enough(packages: object) -> None:
    assert not _declares_debugpy(packages)


# -- vscode_attach ---------------------------------------------------------------------------------

SESSION = "/tmp/x/session_2026-11-25_21-25-07_342785_3489"
PKG_ROOT = f"{SESSION}/runtime_resources/working_dir_files/_ray_pkg_de93e2b51e801a8f"


def frame(n: int, name: str, path: str, line: int) -> Frame:
    return Frame(id=n, name=name, path=path, line=line, source_reference=0)


def test_vscode_attach_maps_the_working_dir_package() -> None:
    frames = [
        frame(1, "_resume_span", "/opt/venv/lib/python3.11/site-packages/ray/util/tracing/t.py", 487),
        frame(2, "work", f"{PKG_ROOT}/crash.py", 14),
        frame(3, "helper", f"{PKG_ROOT}/lib/helpers.py", 3),
    ]
    config = vscode_attach("127.0.0.1", 5678, frames)
    assert config["type"] == "debugpy"
    assert config["request"] == "attach"
    assert config["connect"] == {"host": "127.0.0.1", "port": 5678}
    assert config["pathMappings"] == [{"localRoot": "${workspaceFolder}", "remoteRoot": PKG_ROOT}]
    assert json.loads(json.dumps(config)) == config


def test_vscode_attach_maps_a_nested_file_to_the_package_root() -> None:
    config = vscode_attach("localhost", 1, [frame(1, "f", f"{PKG_ROOT}/pkg/sub/mod.py", 1)])
    assert config["pathMappings"][0]["remoteRoot"] == PKG_ROOT


def test_vscode_attach_windows_separators() -> None:
    path = PKG_ROOT.replace("/", "\\") + "\\crash.py"
    config = vscode_attach("localhost", 1, [frame(1, "work", path, 14)])
    assert config["pathMappings"][0]["remoteRoot"] == PKG_ROOT


def test_vscode_attach_without_a_package_has_no_mappings() -> None:
    frames = [
        frame(1, "main", "/home/u/project/train.py", 3),
        frame(2, "execute_task", "/opt/venv/lib/python3.11/site-packages/python/ray/_raylet.pyx", 2205),
    ]
    config = vscode_attach("127.0.0.1", 5678, frames, name="rollout 3")
    assert "pathMappings" not in config
    assert config["name"] == "rollout 3"
    assert "pathMappings" not in vscode_attach("127.0.0.1", 5678, [])


# -- REPAUSE ---------------------------------------------------------------------------------------


def test_repause_is_one_exec_in_a_namespace_of_its_own() -> None:
    compile(REPAUSE, "<repause>", "eval")
    tree = ast.parse(REPAUSE, mode="eval")
    call = tree.body
    assert isinstance(call, ast.Call)
    assert isinstance(call.func, ast.Name)
    assert call.func.id == "exec"
    assert len(call.args) == 2
    namespace = call.args[1]
    assert isinstance(namespace, ast.Dict)
    assert namespace.keys == []  # the frame's own variables stay untouched


def test_repause_source_defines_and_installs_the_hook() -> None:
    call = ast.parse(REPAUSE, mode="eval").body
    assert isinstance(call, ast.Call)
    source = ast.literal_eval(call.args[0])
    assert isinstance(source, str)
    compile(source, "<repause-source>", "exec")
    module = ast.parse(source)
    functions = [node for node in module.body if isinstance(node, ast.FunctionDef)]
    assert [f.name for f in functions] == ["_cockpit_repause"]
    hook = functions[0]
    # one call only: the hook puts the previous excepthook back before pausing again
    first = hook.body[0]
    assert isinstance(first, ast.Assign)
    assert ast.unparse(first.targets[0]) == "sys.excepthook"
    last = module.body[-1]  # installed only when not installed already: arming twice is arming once
    assert isinstance(last, ast.If) and "_cockpit_repause" in ast.unparse(last.test)
    assert ast.unparse(last.body[0]) == "sys.excepthook = _cockpit_repause"
    assert "set_trace" in ast.unparse(hook)


def test_repause_arms_once_pauses_once_and_disarm_puts_the_hook_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """REPAUSE and DISARM run as the worker runs them, against a stand-in for `ray.util.debugpy`."""
    import sys
    import types

    calls: list[str] = []
    fake = types.ModuleType("ray.util.debugpy")
    fake.POST_MORTEM_ERROR_UUID = "post_mortem_error_uuid"  # type: ignore[attr-defined]
    fake.set_trace = calls.append  # type: ignore[attr-defined]
    util = types.ModuleType("ray.util")
    util.debugpy = fake  # type: ignore[attr-defined]
    ray = types.ModuleType("ray")
    ray.util = util  # type: ignore[attr-defined]
    for name, module in (("ray", ray), ("ray.util", util), ("ray.util.debugpy", fake)):
        monkeypatch.setitem(sys.modules, name, module)

    def original(*_args: object) -> None:
        calls.append("original")

    monkeypatch.setattr(sys, "excepthook", original)
    frame_locals: dict[str, object] = {"x": 1}
    eval(REPAUSE, {}, frame_locals)
    eval(REPAUSE, {}, frame_locals)  # armed twice: still one hook over the original
    assert frame_locals == {"x": 1}  # the frame's variables are untouched
    assert eval(REPAUSE_CHECK) == "_cockpit_repause"
    sys.excepthook(ValueError, ValueError("boom"), None)  # what Ray calls once the debugger lets go
    assert calls == ["post_mortem_error_uuid"]  # paused again, once
    assert sys.excepthook is original  # and the original is back for the next time

    eval(REPAUSE, {}, {})
    eval(DISARM, {}, {})  # a release: the worker goes on to fail as it would have
    assert sys.excepthook is original
    assert eval(REPAUSE_CHECK) == "original"


def test_repause_check_reads_the_hook_name() -> None:
    compile(REPAUSE_CHECK, "<check>", "eval")
    assert "excepthook" in REPAUSE_CHECK
