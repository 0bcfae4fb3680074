"""The invariants, checked on what is on disk after an iteration (black-box: JSON, not jmp code).

Each check returns violations (one line each) and adds to the iteration's figures.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from jmp_lab.chaos.plan import IterationPlan
from jmp_lab.chaos.world import read_log

PAGE_KINDS = {"tool_output": "tool_finished"}  # a record's kind by its recall pages' kind


def strict_log(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every line decodes, version 1, one session, seq +1 a line, and the file ends a line."""
    data = path.read_bytes()
    problems = []
    if data and not data.endswith(b"\n"):
        problems.append(f"{path.name}: a torn last line was left in place")
    events: list[dict[str, Any]] = []
    for number, line in enumerate(data.splitlines(), 1):
        try:
            event = json.loads(line)
        except ValueError:
            problems.append(f"{path.name} line {number} does not decode")
            continue
        if event.get("version") != 1:
            problems.append(f"{path.name} line {number}: version {event.get('version')!r}")
        expected = events[-1].get("seq", -2) + 1 if events else event.get("seq")
        if not isinstance(event.get("seq"), int) or event.get("seq") != expected:
            problems.append(
                f"{path.name} line {number}: seq {event.get('seq')} after {expected - 1}"
            )
        if events and event.get("session_id") != events[0].get("session_id"):
            problems.append(f"{path.name} line {number}: another session's record")
        events.append(event)
    return events, problems


def _calls(events: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    calls: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for event in events:
        kind, data = event.get("kind"), event.get("data") or {}
        if kind in ("tool_started", "tool_finished", "tool_uncertain"):
            calls.setdefault(data.get("call_id", "?"), {}).setdefault(kind, []).append(event)
    return calls


def interrupted(events: list[dict[str, Any]]) -> set[str]:
    """Calls with no end, and the last shell command if it was left running (exit_code -1)."""
    found = set()
    last_bash = None
    for call_id, record in _calls(events).items():
        started = record.get("tool_started", [{}])[0].get("data", {})
        finished = record.get("tool_finished")
        if started.get("tool") == "bash":
            last_bash = (call_id, finished)
        if not finished:
            found.add(call_id)
    if last_bash and last_bash[1] and last_bash[1][0]["data"].get("exit_code") == -1:
        found.add(last_bash[0])
    return found


def call_ends(events: list[dict[str, Any]], figures: Counter[str]) -> list[str]:
    """Each started call has one end: one tool_finished, or tool_uncertain (at most one of
    each acknowledgement state); an uncertain call with a finish only if it was left running."""
    problems = []
    for call_id, record in _calls(events).items():
        if "tool_started" not in record:
            problems.append(f"call {call_id}: an end without tool_started")
            continue
        if len(record["tool_started"]) > 1:
            problems.append(f"call {call_id}: tool_started {len(record['tool_started'])} times")
        finished = record.get("tool_finished", [])
        uncertain = record.get("tool_uncertain", [])
        acked = [u for u in uncertain if u["data"].get("acknowledged")]
        if len(finished) > 1 or len(acked) > 1 or len(uncertain) - len(acked) > 1:
            problems.append(f"call {call_id}: {len(finished)} finished, {len(uncertain)} uncertain")
        if not finished and not uncertain:
            problems.append(f"call {call_id}: tool_started and no end after reopening")
        if finished and uncertain and finished[0]["data"].get("exit_code") != -1:
            problems.append(
                f"call {call_id}: finished (exit {finished[0]['data'].get('exit_code')}) "
                "and also uncertain"
            )
        figures["calls"] += 1
    return problems


def witnesses(
    plan: IterationPlan, events: list[dict[str, Any]], workspace: Path, figures: Counter[str]
) -> list[str]:
    """No witness twice (nothing re-ran); no effect without its tool_started before it."""
    problems = []
    started: dict[str, float] = {}
    for event in events:
        if event.get("kind") == "tool_started":
            text = json.dumps(event.get("data"))
            for step in plan.steps():
                if step.token in text:
                    started.setdefault(step.token, float(event.get("time") or 0))
    seen: Counter[str] = Counter()
    for name in ("witness.log", "mcp_witness.log"):
        path = workspace / name
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        for line in lines:
            token, _, when = line.partition(" ")
            seen[token] += 1
            begun = started.get(token)
            if begun is None:
                problems.append(f"{token}: effect in {name} without its tool_started")
            elif when and float(when) < begun:
                problems.append(f"{token}: effect at {when} before its tool_started at {begun}")
    for token, count in seen.items():
        if count > 1:
            figures["re-executions"] += count - 1
            problems.append(f"{token}: ran {count} times")
    for path in workspace.glob("notes_*.txt"):
        text = path.read_text(errors="replace")
        for step in plan.steps():
            if step.token in text and step.token not in started:
                problems.append(f"{step.token}: {path.name} changed without its tool_started")
    figures["effects"] += sum(seen.values())
    return problems


def leaks(
    plan: IterationPlan, dirs: list[Path], outputs: list[str], figures: Counter[str]
) -> list[str]:
    """No key value in any file of the sessions dir or workspace, nor in any output."""
    problems = []
    keys = [k.encode() for k in plan.keys.values()]
    for base in dirs:
        for path in base.rglob("*"):
            try:
                data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            except OSError:
                continue
            for key in keys:
                if key in data:
                    figures["leaks"] += 1
                    problems.append(f"a key value is in {path}")
    for text in outputs:
        for key in plan.keys.values():
            if key in text:
                figures["leaks"] += 1
                problems.append("a key value is in jmp's output")
    return problems


def torn_archives(log: Path, cut: list[bytes], events: list[dict[str, Any]]) -> list[str]:
    """Each torn tail we made is archived byte for byte beside the log, with an error event."""
    archives = [p.read_bytes() for p in log.parent.glob(log.name + ".torn-*")]
    problems = [
        f"torn tail of {len(piece)} bytes not archived exactly"
        for piece in cut
        if piece not in archives
    ]
    said = sum(
        1
        for e in events
        if (e.get("kind") == "error" and "torn" in json.dumps(e["data"]))
        or (e.get("kind") == "error" and "incomplete" in json.dumps(e["data"]))
    )
    if said < len(archives):
        problems.append(f"{len(archives)} torn tails archived, {said} error events say so")
    return problems


def printed_kept(
    printed: dict[tuple[str, int], dict[str, Any]],
    torn: set[tuple[str, int]],
    home: Path,
    figures: Counter[str],
) -> list[str]:
    """Every record printed (by session and seq) is in its session's log unchanged, or its seq
    was never used again; `torn`: lines the runner tore itself (left out)."""
    found = []
    by_session: dict[str, list[int]] = {}
    for sid, seq in printed:
        by_session.setdefault(sid, []).append(seq)
    for sid, seqs in sorted(by_session.items()):
        log = {e.get("seq"): e for e in read_log(home / sid / "events.jsonl")}
        if not log:
            continue  # a vanished session: reported when it vanished
        reused = []
        for seq in sorted(seqs):
            shown = printed[(sid, seq)]
            if seq not in log:
                figures["printed records lost, seq not reused"] += 1
            elif log[seq] != shown and (sid, seq) not in torn:
                reused.append(f"seq {seq} printed as {brief(shown)} is now {brief(log[seq])}")
        if reused:
            figures["printed seqs reused"] += len(reused)
            found.append(
                f"printed-lost-reused: {len(reused)} printed records of session {sid} were "
                f"lost and their seq reused: {'; '.join(reused[:3])}"
            )
    return found


def recall_matches(directory: Path, figures: Counter[str]) -> list[str]:
    """Every page of the recall index (memory.sqlite3, read from a copy) belongs to the record
    the log has at its seq; an index that cannot be read is counted, not a violation."""
    if not (directory / "memory.sqlite3").exists():
        return []
    log = {e.get("seq"): e for e in read_log(directory / "events.jsonl")}
    with tempfile.TemporaryDirectory() as copy:
        for suffix in ("", "-wal"):
            source = directory / f"memory.sqlite3{suffix}"
            if source.exists():
                shutil.copyfile(source, Path(copy) / source.name)
        try:
            with contextlib.closing(sqlite3.connect(Path(copy) / "memory.sqlite3")) as db:
                pages = db.execute("SELECT DISTINCT seq, kind, call_id FROM pages").fetchall()
        except sqlite3.Error:
            figures["recall index unreadable at the end"] += 1
            return []
    stale: list[str] = []
    for seq, kind, call_id in sorted(pages):
        event = log.get(seq)
        data = (event or {}).get("data") or {}
        kind = PAGE_KINDS.get(kind, kind)
        if event is None or event.get("kind") != kind or data.get("call_id", "") != call_id:
            now = brief(event) if event else "nothing"
            line = f"seq {seq} indexed as {kind} {call_id[:8]}, the log has {now}"
            stale += [line] if line not in stale else []
    if not stale:
        return []
    figures["recall pages stale"] += len(stale)
    return [f"recall-stale: the recall index outlived the log: {'; '.join(stale[:3])}"]


def brief(event: dict[str, Any]) -> str:
    """A record in a few words: its kind and status, cause or tool."""
    data = event.get("data") or {}
    detail = data.get("status") or data.get("cause") or data.get("tool") or ""
    return f"{event.get('kind')} {detail}".strip()
