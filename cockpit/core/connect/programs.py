"""Provides a Python program run on a cluster's node and read as a stream of lines: the GPU agent and the
stacks taker both travel this way.

The cockpit is not installed on the nodes, so a program travels as source: the node's own Python (the
one Ray runs workers with) reads it from stdin (`READ_PROGRAM`), nothing is written on the node. For a
local cluster it is a subprocess of this machine; over SSH it runs in a session on the head, or on
another node through a connection tunnelled through the head. Its stderr is drained as it comes, and its
last line is the reason it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

READ_PROGRAM = 'import sys; exec(compile(sys.stdin.read(), "<cockpit gpu-agent>", "exec"))'
"""What the node's Python is told to run: the program arrives on stdin (no file written on the node)."""


class NodeProgram(Protocol):
    """A running program: lines of stdout, then the reason it ended."""

    reason: str

    def lines(self) -> AsyncIterator[str]: ...

    async def stop(self) -> None: ...


class _Stderr:
    """Drains a stderr stream as it comes (so a chatty agent never blocks on a full pipe), keeping the
    last lines for the reason it ended."""

    def __init__(self, stream: Any) -> None:
        self.tail: deque[str] = deque(maxlen=20)
        self._task = asyncio.get_running_loop().create_task(self._drain(stream))

    async def _drain(self, stream: Any) -> None:
        # Chunks, not lines: a line longer than the stream's buffer would stop `readline` for good.
        pending = ""
        while chunk := await stream.read(4096):
            text = chunk.decode(errors="replace") if isinstance(chunk, bytes) else chunk
            *complete, pending = (pending + text).split("\n")
            self.tail.extend(line.strip()[:500] for line in complete if line.strip())
            pending = pending[-4096:]
        if pending.strip():
            self.tail.append(pending.strip()[:500])

    async def last_line(self) -> str:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        return self.tail[-1] if self.tail else ""

    def cancel(self) -> None:
        self._task.cancel()


class LocalProgram:
    """The program as a subprocess of this machine (a local cluster's nodes are this machine)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        assert proc.stderr is not None
        self._stderr = _Stderr(proc.stderr)
        self.reason = ""

    @classmethod
    async def start(
        cls,
        program: str,
        python: str = sys.executable,
        flags: Sequence[str] = (),
    ) -> LocalProgram:
        """PROGRAM (Python source, read by PYTHON from stdin); FLAGS for the interpreter (`-I -S` for a
        program of the standard library alone: a faster start)."""
        proc = await asyncio.create_subprocess_exec(
            python,
            *flags,
            "-c",
            READ_PROGRAM,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=1 << 24,  # a line of the stacks program holds a whole dump
        )
        assert proc.stdin is not None
        proc.stdin.write(program.encode())
        await proc.stdin.drain()
        proc.stdin.close()
        return cls(proc)

    async def lines(self) -> AsyncIterator[str]:
        assert self._proc.stdout is not None
        async for raw in self._proc.stdout:
            yield raw.decode(errors="replace")
        code = await self._proc.wait()
        self.reason = await self._stderr.last_line() or f"the program exited with status {code}"

    async def stop(self) -> None:
        """SIGTERM first (the stacks program then ends the py-spy runs it started), SIGKILL after 2 s."""
        self._stderr.cancel()
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), 2)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                await self._proc.wait()


class SshProgram:
    """The program in an SSH session (on the head, or on a node through the head)."""

    def __init__(self, process: Any) -> None:
        self._process = process
        self._stderr = _Stderr(process.stderr)
        self.reason = ""

    @classmethod
    async def start(
        cls,
        run: Callable[[str], Any],
        python: str,
        program: str,
        flags: Sequence[str] = (),
    ) -> SshProgram:
        command = " ".join(shlex.quote(word) for word in (python, *flags, "-u", "-c", READ_PROGRAM))
        process = await run(command)
        process.stdin.write(program)
        process.stdin.write_eof()
        return cls(process)

    async def lines(self) -> AsyncIterator[str]:
        async for line in self._process.stdout:
            yield line
        await self._process.wait_closed()
        status = self._process.exit_status
        last = await self._stderr.last_line()
        if status == 127:
            self.reason = f"the cluster's Python was not found there ({last})"
        else:
            self.reason = last or f"the program exited with status {status}"

    async def stop(self) -> None:
        self._stderr.cancel()
        with contextlib.suppress(Exception):
            self._process.terminate()  # a signal request; the closed channel ends it at its next write
        self._process.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._process.wait_closed(), 5)
