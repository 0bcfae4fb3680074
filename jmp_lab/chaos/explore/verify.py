"""The checks of one crash state: on the state itself (cheap, every distinct state), then
through the real front end (the next `jmp --session`, the user going on to the end).

On the state (black-box: the JSON lines and files the disk holds, against what the recorded
run printed and did before the crash):

- `session-vanished`: a session whose `session` record was printed has no log;
- `printed-lost`: a record printed before the crash is not in the log, unchanged, at its seq
  (durable before visible: docs/DECISIONS.md); `log-corrupt`: a complete line that does not
  decode, or a seq out of order (a torn last line is allowed: the next open archives it);
- `artifact-missing` / `artifact-short`: a file a record in the log names (a request, an
  output, a checkpoint) is not there, or not as it was written;
- `effect-without-record`: an effect in the world (a witness line, a notes file's token) whose
  `tool_started` is not in the log.

Recovered (jmp_lab/chaos/drive.py: reopen, acknowledge, follow-up, to completion): the first
run finds no stuck lock, no refused log, no internal error (power.reopened); then every check
of the chaos runner's iteration (drive.Driver.verify: the strict log, one end per call, no
witness twice, interrupted calls surfaced, completion, torn tail archived, no key leaked), no
printed seq reused (check.printed_kept), and the history check (`history`).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from jmp_lab.chaos import check
from jmp_lab.chaos.drive import Driver
from jmp_lab.chaos.explore.record import Recording
from jmp_lab.chaos.explore.states import SESSIONS, State
from jmp_lab.chaos.plan import IterationPlan
from jmp_lab.chaos.power import ARTIFACT_FIELDS, reopened
from jmp_lab.chaos.powercut.backing import materialize
from jmp_lab.chaos.world import World

WITNESS_FILES = ("witness.log", "mcp_witness.log")


def lines(data: bytes) -> list[dict[str, Any]]:
    """The complete lines of a log that decode."""
    found = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def on_state(state: State, rec: Recording) -> list[str]:
    """The checks on the state itself (the module docstring)."""
    files, moment = state.files(), state.choice.time
    printed = [line for at, line in rec.printed if at < moment]
    found = []
    logs: dict[str, list[dict[str, Any]]] = {}
    for sid in sorted({line["session_id"] for line in printed}):
        data = files.get(f"{SESSIONS}/{sid}/events.jsonl", b"")
        logs[sid] = events = lines(data)
        if not events and any(p["kind"] == "session" for p in printed if p["session_id"] == sid):
            found.append(f"session-vanished: session {sid} (its session record was printed)")
            continue
        found += _structure(sid, data)
        by_seq = {e.get("seq"): e for e in events}
        lost = [p for p in printed if p["session_id"] == sid and by_seq.get(p["seq"]) != p]
        if lost and events:
            said = ", ".join(f"seq {p['seq']} {p['kind']}" for p in lost[:4])
            found.append(f"printed-lost: {len(lost)} printed records are not in the log ({said})")
        found += _artifacts(sid, events, files, rec.final)
    if rec.session and rec.session not in logs:
        data = files.get(f"{SESSIONS}/{rec.session}/events.jsonl", b"")
        logs[rec.session] = lines(data)
    started = " ".join(
        json.dumps(e.get("data"))
        for events in logs.values()
        for e in events
        if e.get("kind") == "tool_started"
    )
    for token, count in effects(rec.workload.plan, files).items():
        if count and token not in started:
            found.append(f"effect-without-record: {token} took effect, no tool_started names it")
    return found


def _structure(sid: str, data: bytes) -> list[str]:
    problems, previous = [], None
    for number, line in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), 1):
        try:
            seq = json.loads(line).get("seq")
        except ValueError:
            problems.append(f"log-corrupt: {sid} line {number} does not decode")
            continue
        if previous is not None and seq != previous + 1:
            problems.append(f"log-corrupt: {sid} line {number}: seq {seq} after {previous}")
        previous = seq
    return problems


def _artifacts(
    sid: str, events: list[dict[str, Any]], files: dict[str, bytes], final: dict[str, bytes]
) -> list[str]:
    found = []
    for event in events:
        data = event.get("data") or {}
        for name, _ in ARTIFACT_FIELDS.get(event.get("kind", ""), ()):
            rel = data.get(name)
            if not isinstance(rel, str):
                continue
            path = f"{SESSIONS}/{sid}/{rel}"
            whole = final.get(path)
            now = files.get(path)
            where = f"{rel} ({event['kind']} seq {event.get('seq')})"
            if now is None:
                found.append(f"artifact-missing: {where} is not on the disk")
            elif whole is not None and now != whole:
                found.append(f"artifact-short: {where} holds {len(now)} of {len(whole)} bytes")
    return found


def effects(plan: IterationPlan, files: dict[str, bytes]) -> Counter[str]:
    """How many times each planned call took effect in the world: witness lines of a command
    or an MCP call, 1 for a notes file that holds a write's or an edit's token."""
    counts: Counter[str] = Counter()
    texts = [
        data.decode(errors="replace")
        for path, data in files.items()
        if path.startswith("/ws/") and path.rsplit("/", 1)[-1].startswith("notes_")
    ]
    witness = [
        line.partition(" ")[0]
        for path, data in files.items()
        if path.startswith("/ws/") and path.rsplit("/", 1)[-1] in WITNESS_FILES
        for line in data.decode(errors="replace").splitlines()
    ]
    for step in plan.steps():
        if step.tool in ("write", "edit"):
            counts[step.token] = int(any(step.token in text for text in texts))
        else:
            counts[step.token] = witness.count(step.token)
    return counts


def history(
    plan: IterationPlan,
    before: Counter[str],
    after: Counter[str],
    at_crash: list[dict[str, Any]],
    final: list[dict[str, Any]],
) -> list[str]:
    """Elle-style, on jmp's own records: a finished call took effect exactly once, an uncertain
    one at most once and never again after the crash, an acknowledged one is never re-run, a
    call with no tool_started took no effect."""
    found = []
    calls: dict[str, dict[str, Any]] = {}
    for event in final:
        data = event.get("data") or {}
        if event.get("kind") == "tool_started":
            for step in plan.steps():
                if step.token in json.dumps(data):
                    calls[str(data.get("call_id"))] = {"token": step.token, "ends": []}
    for event in final:
        data = event.get("data") or {}
        if event.get("kind") in ("tool_finished", "tool_uncertain"):
            call = calls.get(str(data.get("call_id")))
            if call is not None:
                call["ends"].append(event)
    acked = {
        str((e.get("data") or {}).get("call_id"))
        for e in at_crash
        if e.get("kind") == "tool_uncertain" and (e.get("data") or {}).get("acknowledged")
    }
    named = {call["token"] for call in calls.values()}
    for call_id, call in calls.items():
        token, ends = call["token"], call["ends"]
        finished = [e for e in ends if e["kind"] == "tool_finished"]
        uncertain = [e for e in ends if e["kind"] == "tool_uncertain"]
        done = finished and finished[0]["data"].get("exit_code") != -1 and not uncertain
        if done and after[token] != 1:
            found.append(f"history: finished call {token} took effect {after[token]} times")
        if uncertain and after[token] > 1:
            found.append(f"history: uncertain call {token} took effect {after[token]} times")
        if uncertain and after[token] != before[token]:
            found.append(f"history: uncertain call {token} ran again after the crash")
        if call_id in acked and after[token] != before[token]:
            found.append(f"history: acknowledged call {token} ran again")
    for token, count in after.items():
        if count and token not in named:
            found.append(f"history: {token} took effect, no tool_started names it")
    return found


def recover(
    state: State, rec: Recording, base: Path, command: list[str], warm: Path
) -> tuple[list[str], Counter[str]]:
    """Lay `state` at the recording's ROOT and go on through the CLI as a user would; what was
    violated, and the driver's figures."""
    plan, root = rec.workload.plan, rec.root
    shutil.rmtree(root, ignore_errors=True)
    world = World(plan, root, warm)
    materialize(root, state.entries)
    files = state.files()
    sid = rec.session
    log = files.get(f"{SESSIONS}/{sid}/events.jsonl", b"") if sid else b""
    at_crash = lines(log)
    figures: Counter[str] = Counter()
    if not at_crash:
        world.close(keep=False)
        figures["states with no session to reopen"] += 1
        return [], figures
    world.session_id = sid
    driver = Driver(plan, base, command, warm, restart_pool=False, world=world)
    driver.interrupted = check.interrupted(at_crash)
    if log and not log.endswith(b"\n"):
        driver.cut.append(log[log.rfind(b"\n") + 1 :])  # the torn tail: must be archived
    try:
        assert sid is not None
        out = driver.invoke("--session", sid)
        found = reopened(out)
        users = sum(1 for e in at_crash if e.get("kind") == "user")
        driver.go_on(out, max(users, 1) - 1)
        driver.verify()
        found += driver.report.violations
        printed = {
            (line["session_id"], line["seq"]): line
            for at, line in rec.printed
            if at < state.choice.time
        }
        found += check.printed_kept(printed, set(), world.home, driver.report.figures)
        after = _world_files(world.workspace)
        final = check.strict_log(world.home / sid / "events.jsonl")[0]
        found += history(plan, effects(plan, files), effects(plan, after), at_crash, final)
    finally:
        world.close(keep=True)
    figures.update(driver.report.figures)
    return found, figures


def _world_files(workspace: Path) -> dict[str, bytes]:
    return {
        f"/ws/{p.relative_to(workspace)}": p.read_bytes()
        for p in workspace.rglob("*")
        if p.is_file() and not p.is_symlink()
    }
