"""Provides the program each node runs to dump its stacks: read by the node's own Python from stdin, it
runs py-spy (from next to that Python) on the given pids, a few at once, and prints one JSON line per pid
as each is done. It needs the standard library alone, writes nothing on the node, and stops its py-spy
runs when its reader goes away.
"""

from __future__ import annotations

from collections.abc import Sequence

NODE_PARALLEL = 8
"""py-spy runs at once on one node."""
PYSPY_TIMEOUT = 20.0
"""One py-spy run (it pauses its process for a moment; a wedged one is given up)."""

_PROGRAM = r"""
import concurrent.futures, json, os, shutil, signal, subprocess, sys, threading, time

_running = set()
_lock = threading.Lock()
_stopping = threading.Event()
_PARENT = os.getppid()
_MAX_LINE = 1000000

def _stop(*_):
    # The reader left (a closed channel, a killed cockpit): no py-spy is left pausing processes.
    with _lock:
        _stopping.set()
        for proc in list(_running):
            try:
                proc.kill()
            except OSError:
                pass
    os._exit(0)

def _watchdog():
    while not _stopping.wait(1.0):
        if os.getppid() != _PARENT:
            _stop()

def _spy():
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")

def _scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip()
    except OSError:
        return ""

def _title(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read(400).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""

_KEEP = ("name", "filename", "short_filename", "line", "module")

def _trim(threads, frames, chars):
    for t in threads:
        t["frames"] = [
            {k: (v[:chars] if isinstance(v, str) else v) for k, v in f.items()} for f in t["frames"][:frames]
        ]
        if isinstance(t.get("thread_name"), str):
            t["thread_name"] = t["thread_name"][:chars]
    return threads

def _line(result):
    line = json.dumps(result)
    if len(line) <= _MAX_LINE or "threads" not in result:
        return line
    # A huge dump (hundreds of threads, deep native stacks): cut until the line is bounded, and say so.
    result["cut"] = True
    for frames, chars, count in ((128, 300, 512), (64, 200, 256), (32, 120, 64), (16, 80, 16)):
        result["threads"] = _trim(result["threads"][:count], frames, chars)
        line = json.dumps(result)
        if len(line) <= _MAX_LINE:
            return line
    return json.dumps({"pid": result["pid"], "title": result["title"], "error": "the dump is too large"})

def _one(spy, pid):
    if _stopping.is_set():
        return None
    title = _title(pid)
    command = [spy, "dump", "--json", "--pid", str(pid)] + (["--native"] if _NATIVE else [])
    with _lock:  # started and known at once: a stop in between cannot miss it
        if _stopping.is_set():
            return None
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _running.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"pid": pid, "title": title, "error": "py-spy took longer than %d s" % _TIMEOUT}
    finally:
        with _lock:
            _running.discard(proc)
    out = stdout.decode("utf-8", "replace")
    if proc.returncode == 0:
        try:
            threads = json.loads(out)
            for t in threads:
                t["frames"] = [{k: f.get(k) for k in _KEEP} for f in t.get("frames") or ()]
                t.pop("process_info", None)
            return {"pid": pid, "title": title, "threads": threads}
        except (ValueError, AttributeError, TypeError):
            pass
    text = (stderr.decode("utf-8", "replace") + "\n" + out).strip().splitlines()
    lines = [l.strip() for l in text if l.strip() and not l.startswith(" ") and "backtrace" not in l]
    error = lines[0] if lines else "py-spy failed (status %d)" % proc.returncode
    # A refused ptrace often shows only in the first cause ("Failed to get process executable name" /
    # "Caused by: 0: Permission denied (os error 13)"): keep it, or it reads as an exited process.
    stripped = [l.strip() for l in text if l.strip()]
    if "Caused by:" in stripped:
        causes = stripped[stripped.index("Caused by:") + 1:]
        if causes:
            error += " (%s)" % causes[0].split(": ", 1)[-1]
    return {"pid": pid, "title": title, "error": error[:400]}

def _main():
    parallel = max(1, min(_PARALLEL, os.cpu_count() or 1))
    spy = _spy()
    hello = {"hello": 1, "py_spy": spy or "", "ptrace_scope": _scope(), "uid": os.getuid()}
    print(json.dumps(hello), flush=True)
    if not spy:
        return
    pool = concurrent.futures.ThreadPoolExecutor(parallel)
    for future in concurrent.futures.as_completed([pool.submit(_one, spy, p) for p in _PIDS]):
        result = future.result()
        if result is not None:
            print(_line(result), flush=True)
    pool.shutdown(wait=False)

signal.signal(signal.SIGTERM, _stop)
signal.signal(signal.SIGHUP, _stop)
threading.Thread(target=_watchdog, daemon=True).start()
try:
    _main()
except (BrokenPipeError, KeyboardInterrupt, OSError):
    _stop()
"""


def stacks_program(pids: Sequence[int], native: bool = False) -> str:
    """The program each node runs (read by its Python from stdin): py-spy on PIDS, a JSON line each."""
    return (
        f"_PIDS = {[int(p) for p in pids]!r}\n_NATIVE = {bool(native)!r}\n"
        f"_TIMEOUT = {int(PYSPY_TIMEOUT)!r}\n_PARALLEL = {NODE_PARALLEL!r}\n{_PROGRAM}"
    )
