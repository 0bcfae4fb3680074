"""Recall cache cost of one big bash command: size and time, 100 KB vs 1 MB (issue 9, item 6).

The records are the ones the kernel writes for the call (bounded target and previews, the whole
command in the request artifact, its output in an output artifact); the command prints as much
as it is long. Growth must be linear: ten times the command, about ten times the cost.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from kernel.context.recall.index import RecallIndex
from kernel.run.ledger import ARGUMENTS_PREVIEW_CHARS, preview, shown_target
from kernel.store.session import Session
from protocol.events import ToolFinishedData, ToolStartedData, UserData

SIZES = (100_000, 1_000_000)


def measure(home: Path, size: int) -> tuple[int, float]:
    """(cache bytes, seconds to index) for one bash call whose command and output are `size`."""
    body = "\n".join(f"{n:07d} " + "x" * 92 for n in range(size // 100))
    command = f"cat <<'EOF'\n{body}\nEOF"
    home.mkdir(parents=True)
    with Session.create(home, home) as session:
        request = session.artifacts.write_json("c1.request.json", {"command": command})
        output = session.artifacts.write_text("c1.output.txt", body)
        session.append(UserData(text="print the data"))
        target = shown_target(command)
        arguments = preview(command, ARGUMENTS_PREVIEW_CHARS, "the request artifact")
        session.append(
            ToolStartedData(
                call_id="c1", tool="bash", target=target, request=request, arguments=arguments
            )
        )
        session.append(
            ToolFinishedData(
                call_id="c1",
                tool="bash",
                status="ok",
                exit_code=0,
                text=preview(body),
                arguments=arguments,
                full_output=output,
                target=target,
                truncated=True,
            )
        )
        path = session.directory / "memory.sqlite3"
        start = time.perf_counter()
        index = RecallIndex.open_or_rebuild(path)
        index.sync(session.events, session.artifacts.read_text)
        seconds = time.perf_counter() - start
        size_bytes = sum(p.stat().st_size for p in session.directory.glob("memory.sqlite3*"))
        index.close()
    return size_bytes, seconds


def run() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="jbr"))
    try:
        rows = [(size, *measure(tmp / str(size), size)) for size in SIZES]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (small, small_bytes, small_s), (big, big_bytes, big_s) = rows
    table = [
        "| command (and output) | cache + WAL | per input byte | index time |",
        "|---|---|---|---|",
    ]
    for size, cache, seconds in rows:
        table.append(
            f"| {size:,} bytes | {cache:,} bytes | {cache / size:.1f} | {seconds * 1000:.0f} ms |"
        )
    table.append(
        f"\n{big // small}x the command: {big_bytes / small_bytes:.1f}x the cache, "
        f"{big_s / small_s:.1f}x the time (linear is about {big // small}x; quadratic would be "
        f"{(big // small) ** 2}x)."
    )
    return "\n".join(table)
