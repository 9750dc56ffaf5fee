"""Provides hostile cluster text for property tests: Hypothesis strategies, and the oracle for what must
never reach the terminal.

Strings from the cluster (entrypoints, job messages, actor and node names, death causes, log lines, file
names) are whatever a user or a process put there: escapes with and without colours, partial sequences,
C1 controls, markup-looking brackets, lone surrogates, very long lines, wide characters.
"""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st

from cockpit.core.snapshots import NA, ActorRow, GpuProcess, GpuSample, JobRow, NodeSnapshot

FRAGMENTS = [
    "\x1b[K",  # erase to the end of the line
    "\x1b[2K",
    "\x1b[A",  # tqdm's cursor up
    "\x1b[1A\x1b[2K",
    "\r",
    "\x1b]0;title\x07",  # OSC window title
    "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",  # OSC hyperlink
    "\x1b[31m",
    "\x1b[0m",
    "\x1b[38;5;300m",
    "\x1b[38;2;999;1;1m",
    "\x1b[1;4;7m",
    "\x1b[",  # partial sequences
    "\x1b]0;never ends",
    "\x1b",
    "\x1b[31",
    "\x9b31m",  # C1 CSI
    "\x90",
    "\x85",
    "\x7f",
    "\x00",
    "\x07",
    "\b",
    "\t",
    "\n",
    "\u2028",
    "\ud800",  # a lone surrogate: str allows it, a terminal cannot write it
    "\udfff",
    "中文",
    "🚀",
    "e\u0301",
    "[b]x[/b]",
    "[/0]",
    "w[/0]",
    "[/data/a.parquet]",
    "[@click=app.quit]",
    "[link=http://x]",
    "\\",
    "plain text ",
]

hostile_text = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=30).map("".join),
    st.text(),
    st.binary().map(lambda b: b.decode("latin-1")),  # every byte as one character: C0, DEL and C1
    st.binary().map(lambda b: b.decode("utf-8", errors="replace")),
)
"""Any string, biased towards what breaks terminals and markup parsers."""


def controls(text: str) -> list[str]:
    """The characters in TEXT a terminal would act on or cannot write: C0 (tab and newline included), DEL,
    C1, the line and paragraph separators, lone surrogates."""
    return [ch for ch in text if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")]


T0 = 1_795_642_346.0

Cluster = tuple[tuple[NodeSnapshot, ...], list[ActorRow]]

statuses = st.sampled_from(["PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]) | hostile_text


@st.composite
def hostile_jobs(draw: st.DrawFn) -> JobRow:
    """A job whose every string came from a hostile cluster."""
    start = draw(st.none() | st.floats(T0 - 1e6, T0))
    return JobRow(
        submission_id=draw(hostile_text),
        job_id=draw(hostile_text),
        type=draw(hostile_text),
        status=draw(statuses),
        entrypoint=draw(hostile_text),
        message=draw(hostile_text),
        start_time=start,
        end_time=None if start is None else draw(st.none() | st.floats(start, T0)),
        driver_node_id=draw(hostile_text),
        error_type=draw(hostile_text),
    )


@st.composite
def hostile_cluster(draw: st.DrawFn) -> Cluster:
    """A few nodes (alive and dead, with GPUs, logical GPUs or none) and the actors on their GPUs, every
    string hostile: node ids, IPs, host names, death causes, GPU models, actor classes and names."""
    nodes = []
    actors = []
    for n in range(draw(st.integers(1, 4))):
        alive = draw(st.booleans())
        node_id = f"{n:02d}{draw(hostile_text)}"
        gpus = tuple(
            GpuSample(
                index=g,
                name=draw(hostile_text),
                uuid=draw(hostile_text),
                utilization=draw(st.sampled_from([NA, 0.0, 55.0, 100.0])),
                memory_used_mib=1024.0,
                memory_total_mib=81_559.0,
                power_w=NA,
                temperature_c=NA,
                processes=(GpuProcess(pid=10_000 + n * 16 + g, memory_mib=1024.0, utilization=NA),),
            )
            for g in range(draw(st.integers(0, 2)))
        )
        logical = float(len(gpus)) or draw(st.sampled_from([0.0, 2.0]))
        node = NodeSnapshot(
            node_id=node_id,
            ip=draw(hostile_text),
            hostname=draw(hostile_text),
            is_head=n == 0,
            state="ALIVE" if alive else draw(st.just("DEAD") | hostile_text),
            state_message=draw(hostile_text),
            start_time=T0 - 3600 + n,
            end_time=None,
            logical_cpus=8.0,
            logical_gpus=logical,
            resources_total={"CPU": 8.0, "GPU": logical},
            gpus=gpus,
            sample_time=T0 - 1.0,
        )
        nodes.append(node)
        holders = [gpu.processes[0].pid for gpu in gpus] or ([None] if logical else [])
        for k, pid in enumerate(holders):
            actors.append(
                ActorRow(
                    actor_id=f"{n:02d}{k:02d}" + "a" * 28,
                    class_name=draw(hostile_text),
                    name=draw(hostile_text),
                    state="ALIVE",
                    job_id="02000000",
                    node_id=node_id,
                    pid=pid,
                    num_restarts=0,
                    required_resources={"GPU": 1.0},
                )
            )
    return tuple(nodes), actors
