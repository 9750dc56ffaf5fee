"""The DAP client against a real debugpy (1.8.22): a debuggee stopped post-mortem on an uncaught exception,
as a Ray worker with `RAY_DEBUG_POST_MORTEM=1` is, and its real adapter process. No Ray, no mocks.

Every wait is bounded (each request has a timeout, and so has each wait on the debuggee), so a bug
fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncssh
import pytest

from cockpit.core.debug.dap import DapClient, Frame, Stopped, Variable
from cockpit.core.debug.errors import DapBusy, DapClosed, DapError
from tests.harness import debuggee as debuggee_script
from tests.harness.debuggee import EXIT_CODE, Debuggee, kill_adapter, start_debuggee
from tests.harness.loop_errors import fail_on_loop_errors
from tests.harness.sshd import SshServer, start_sshd

SCRIPT = str(debuggee_script.SCRIPT)
RAISE_LINE = next(
    number
    for number, line in enumerate(debuggee_script.SCRIPT.read_text().splitlines(), 1)
    if 'raise ValueError(f"boom {x}")' in line
)

no_loop_errors = pytest.fixture(autouse=True)(fail_on_loop_errors)


@pytest.fixture
def debuggee(tmp_path: Path) -> Iterator[Debuggee]:
    process = start_debuggee(stderr_path=tmp_path / "debuggee.err")
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture
def lingering_debuggee(tmp_path: Path) -> Iterator[Debuggee]:
    process = start_debuggee("--linger", stderr_path=tmp_path / "debuggee.err")
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture
async def session(debuggee: Debuggee) -> AsyncIterator[tuple[DapClient, Stopped]]:
    """A client attached to the debuggee, stopped on its exception."""
    client = await DapClient.connect_tcp("127.0.0.1", debuggee.port, timeout=5)
    try:
        stopped = await client.attach_post_mortem(timeout=15)
        yield client, stopped
    finally:
        await client.close()


async def top_frame(client: DapClient, stopped: Stopped) -> Frame:
    return (await client.stack(stopped.thread_id))[0]


async def locals_of(client: DapClient, frame: Frame) -> dict[str, Variable]:
    scopes = await client.scopes(frame.id)
    local_scope = next(scope for scope in scopes if scope.name == "Locals")
    return {v.name: v for v in await client.variables(local_scope.variables_reference)}


async def test_attach_stops_on_the_exception(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    assert stopped.reason == "exception"
    assert stopped.description == "boom 41"
    assert stopped.text == "ValueError"  # without debugpy's "(note: ... paused at ...)"
    assert client.stopped == stopped
    assert not client.closed and client.close_reason is None


async def test_exception_info(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    details = await client.exception_info(stopped.thread_id)
    assert details.type_name == "ValueError"
    assert details.message == "boom 41"
    assert f"line {RAISE_LINE}, in crash" in details.stack_trace
    assert details.stack_trace.rstrip().endswith("ValueError: boom 41")


async def test_stack_top_frame_is_the_raise(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    frames = await client.stack(stopped.thread_id)
    assert [f.name for f in frames[:2]] == ["crash", "main"]
    assert (frames[0].path, frames[0].line) == (SCRIPT, RAISE_LINE)
    assert len({f.id for f in frames}) == len(frames)


async def test_locals_expand_lazily_through_nesting(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    variables = await locals_of(client, await top_frame(client, stopped))
    assert (variables["x"].value, variables["x"].type, variables["x"].variables_reference) == ("41", "int", 0)
    nested = variables["nested"]
    assert nested.type == "dict" and nested.variables_reference > 0
    level1 = {v.name: v for v in await client.variables(nested.variables_reference)}
    assert level1["'t'"].value == "(3, 4)"
    a_list = level1["'a'"]
    assert a_list.type == "list" and a_list.variables_reference > 0
    level2 = {v.name: v for v in await client.variables(a_list.variables_reference)}
    assert level2["0"].value == "1"
    inner = level2["1"]
    assert inner.type == "dict" and inner.variables_reference > 0
    level3 = {v.name: v for v in await client.variables(inner.variables_reference)}
    assert (level3["'b'"].value, level3["'b'"].variables_reference) == ("2", 0)
    obj = {v.name: v for v in await client.variables(variables["obj"].variables_reference)}
    assert (obj["label"].value, obj["size"].value) == ("'payload'", "3")
    assert variables["obj"].type == "Payload"


async def test_evaluate_in_the_top_frame(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    frame = await top_frame(client, stopped)
    result = await client.evaluate("x + 1", frame.id)
    assert (result.name, result.value, result.type) == ("x + 1", "42", "int")
    structured = await client.evaluate("nested['a']", frame.id)
    assert structured.variables_reference > 0
    items = {v.name: v.value for v in await client.variables(structured.variables_reference)}
    assert (items["0"], items["1"]) == ("1", "{'b': 2}")


async def test_evaluate_error_is_one_line_with_the_python_error(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    frame = await top_frame(client, stopped)
    with pytest.raises(DapError) as error:
        await client.evaluate("undefined_name + 1", frame.id)
    assert str(error.value) == "NameError: name 'undefined_name' is not defined"
    assert not isinstance(error.value, DapClosed)
    # The session goes on after a failed request.
    assert (await client.evaluate("x", frame.id)).value == "41"


async def test_source_of_a_worker_file(session: tuple[DapClient, Stopped]) -> None:
    client, stopped = session
    frame = await top_frame(client, stopped)
    assert frame.source_reference > 0  # arranged by attach_post_mortem's path mapping
    text = await client.source(frame.path, frame.source_reference)
    assert text == debuggee_script.SCRIPT.read_text()


async def test_release_lets_the_worker_go_on(debuggee: Debuggee, session: tuple[DapClient, Stopped]) -> None:
    client, _stopped = session
    events: list[str] = []
    client.on_event = lambda name, _body: events.append(name)
    await client.release()
    assert client.closed
    code, out = await asyncio.to_thread(debuggee.output)
    assert (code, out) == (EXIT_CODE, "RELEASED\n")
    assert "terminated" in events
    assert client.stopped is None
    await client.release()  # again, on a closed session: nothing to do, nothing raised


async def test_continue_alone_resumes_the_worker(
    debuggee: Debuggee, session: tuple[DapClient, Stopped]
) -> None:
    """The first half of `release`, without the disconnect that would resume the worker anyway."""
    client, stopped = session
    await client.request("continue", {"threadId": stopped.thread_id}, timeout=10)
    code, out = await asyncio.to_thread(debuggee.output)
    assert (code, out) == (EXIT_CODE, "RELEASED\n")
    await client.wait_event("terminated", 10)
    await client.detach()  # whether or not the adapter has hung up by now
    assert client.closed


async def test_detach_also_resumes(debuggee: Debuggee, session: tuple[DapClient, Stopped]) -> None:
    client, _stopped = session
    await client.detach()
    assert client.closed
    code, out = await asyncio.to_thread(debuggee.output)
    assert (code, out) == (EXIT_CODE, "RELEASED\n")


async def test_second_client_is_busy_and_the_first_goes_on(
    debuggee: Debuggee, session: tuple[DapClient, Stopped]
) -> None:
    client, stopped = session
    async with await DapClient.connect_tcp("127.0.0.1", debuggee.port, timeout=5) as second:
        with pytest.raises(DapBusy) as error:
            await second.attach_post_mortem(timeout=10)
        assert second.closed  # a failed attach closes its client
    assert str(error.value) == f"another debugger is attached to worker 127.0.0.1:{debuggee.port}."
    frame = await top_frame(client, stopped)
    assert (await client.evaluate("x + 1", frame.id)).value == "42"
    await client.release()
    assert (await asyncio.to_thread(debuggee.output))[0] == EXIT_CODE


async def test_adapter_dying_mid_request_closes_the_session(
    debuggee: Debuggee, session: tuple[DapClient, Stopped]
) -> None:
    client, stopped = session
    frame = await top_frame(client, stopped)
    pending = asyncio.ensure_future(client.evaluate("__import__('time').sleep(8)", frame.id))
    await asyncio.sleep(0.3)
    assert not pending.done()
    kill_adapter(debuggee.adapter_pid)
    debuggee.process.send_signal(signal.SIGKILL)
    with pytest.raises(DapClosed) as error:
        await asyncio.wait_for(pending, 5)
    assert str(error.value) == (
        f"the debug session with worker 127.0.0.1:{debuggee.port} ended: "
        "the debug adapter closed the connection (the worker or its adapter exited)."
    )
    assert client.closed
    with pytest.raises(DapClosed):
        await client.stack(stopped.thread_id)


async def test_worker_dying_under_a_live_adapter_closes_the_session(
    debuggee: Debuggee, session: tuple[DapClient, Stopped]
) -> None:
    client, stopped = session
    frame = await top_frame(client, stopped)
    pending = asyncio.ensure_future(client.evaluate("__import__('time').sleep(8)", frame.id))
    await asyncio.sleep(0.3)
    os.kill(debuggee.process.pid, signal.SIGKILL)
    with pytest.raises(DapClosed) as error:
        await asyncio.wait_for(pending, 5)
    assert "the worker process went away" in str(error.value)
    with pytest.raises(DapClosed):
        await client.scopes(frame.id)


async def test_attach_to_a_worker_no_longer_paused(lingering_debuggee: Debuggee) -> None:
    """A reused Ray worker keeps its adapter listening after a session: attaching again finds nothing
    stopped, says so, and leaves the worker running."""
    port = lingering_debuggee.port
    async with await DapClient.connect_tcp("127.0.0.1", port, timeout=5) as first:
        await first.attach_post_mortem(timeout=15)
        await first.release()
    async with await DapClient.connect_tcp("127.0.0.1", port, timeout=5) as again:
        with pytest.raises(DapError) as error:
            await again.attach_post_mortem(timeout=2)
        assert again.closed  # after a disconnect, so the worker keeps none of its breakpoints
    assert not isinstance(error.value, (DapBusy, DapClosed))
    assert "did not stop within 2 s" in str(error.value)
    assert lingering_debuggee.process.poll() is None


async def test_connect_to_a_closed_port_is_one_clear_error() -> None:
    # A port bound but not listening: refused, and no other process (nor this connect) can take it.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        with pytest.raises(DapError) as error:
            await DapClient.connect_tcp("127.0.0.1", port, timeout=5)
    assert str(error.value) == (
        f"nothing listens on 127.0.0.1:{port} (the worker may have exited, or the port is not reachable)."
    )


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshServer]:
    server = start_sshd(tmp_path / "sshd")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.ssh
async def test_a_session_over_an_ssh_direct_tcpip_channel(debuggee: Debuggee, sshd: SshServer) -> None:
    """The same client over asyncssh's SSHReader/SSHWriter in bytes mode, as the cockpit reaches a worker
    behind the head node; the adapter hanging up reaches it through the channel too."""
    async with asyncssh.connect(
        sshd.host,
        sshd.port,
        username=sshd.user,
        client_keys=[str(sshd.client_key)],
        known_hosts=str(sshd.known_hosts),
        agent_path=None,
        config=None,
        connect_timeout=10,
    ) as conn:
        reader, writer = await conn.open_connection("127.0.0.1", debuggee.port, encoding=None)
        client = DapClient(reader, writer, f"worker 127.0.0.1:{debuggee.port} (over SSH)")
        try:
            stopped = await client.attach_post_mortem(timeout=15)
            frame = await top_frame(client, stopped)
            assert (await client.evaluate("x + 1", frame.id)).value == "42"
            assert "boom" in await client.source(frame.path, frame.source_reference)
            kill_adapter(debuggee.adapter_pid)
            with pytest.raises(DapClosed):  # whatever comes first: no event, the end of the session
                await client.wait_event("no such event", 10)
            assert client.close_reason is not None and "closed the connection" in client.close_reason
            with pytest.raises(DapClosed):
                await client.stack(stopped.thread_id, levels=1)
        finally:
            await client.close()
