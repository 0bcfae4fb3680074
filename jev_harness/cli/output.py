"""What `jev-harness` prints: JSON lines with --json (like `jmp --json`), else a short view.

Everything printed passes `_write`: the redactor (every key variable that is set, the token
formats) on both streams, and `terminal_safe` for the readable view and stderr, so no escape
sequence from a page, a file name or an error acts on the terminal.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

from kernel.display import json_line, json_text, shown_result, terminal_safe
from kernel.store.redact import Redactor, environment_secrets

PREVIEW = 160


class Output:
    """Prints events, the final result, check verdicts and inspect reports."""

    def __init__(self, json: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json = json
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.session_id: str | None = None
        self.command = ""  # check-task, run or inspect: --json failures keep its shape
        self._lock = threading.Lock()
        self.redactor = Redactor(environment_secrets())

    def redact(self, text: str) -> str:
        return self.redactor.text(text)

    def _write(self, text: str, stream: TextIO | None = None) -> None:
        """The one way out: redacted; made inert unless it is --json stdout."""
        with self._lock:
            stream = stream or self.out
            text = self.redact(text)
            if not (self.json and stream is self.out):
                text = terminal_safe(text)
            stream.write(text)
            stream.flush()

    def event(self, event: Any) -> None:
        """One persisted event (already redacted by the session)."""
        if self.json:
            from protocol.codec import encode_event

            self._write(encode_event(event).decode() + "\n")
            return
        line = render(event)
        if line:
            self._write(line + "\n")

    def result(self, data: dict[str, Any]) -> None:
        if self.json:  # the one writer of the line (kernel/display.py)
            self._write(json_line("result", data, self.redactor) + "\n")
            return
        data = shown_result(data, self.redactor)
        if data.get("artifact"):
            self._write(f"receipt: {json.dumps(data['artifact'], ensure_ascii=False)}\n")
        self._write("\n".join(closing(data)) + "\n")

    def verdict(self, verdict: dict[str, Any]) -> None:
        if self.json:
            self._write(json_text(verdict, self.redactor) + "\n")
            return
        tools = ", ".join(t.get("name", "?") for t in verdict.get("tools", []))
        head = "sound" if verdict.get("ok") else "not sound"
        lines = [f"check-task: {head}"] + [f"  problem: {p}" for p in verdict.get("problems", [])]
        if tools:
            lines.append(f"  tools: {tools}")
        if verdict.get("labels"):
            lines.append(f"  labels: {', '.join(verdict['labels'])}")
        self._write("\n".join(lines) + "\n")

    def report(self, report: dict[str, Any]) -> None:
        if self.json:
            self._write(json_text(report, self.redactor) + "\n")
            return
        lines = [f"session {report['session_id']}: {report['status']}", report["summary"]]
        if report.get("artifact"):
            lines.append("receipt: " + json.dumps(report["artifact"], ensure_ascii=False))
        self._write("\n".join(line for line in lines if line) + "\n")

    def fail(self, message: str, status: str = "error") -> int:
        """The error on stderr and, for --json, the command's own JSON shape; returns 2."""
        self._write(f"jev-harness: error: {message}\n", self.err)
        if self.json and self.command == "check-task":
            self.verdict({"ok": False, "problems": [message], "tools": [], "labels": []})
        elif self.json and self.command == "inspect":
            self.report(
                {
                    "session_id": self.session_id,
                    "status": status,
                    "summary": message,
                    "artifact": None,
                }
            )
        elif self.json:
            data = {
                "session_id": self.session_id,
                "status": status,
                "summary": message,
                "session_dir": None,
                "artifact": None,
            }
            self.result(data)
        return 2


def closing(data: dict[str, Any]) -> list[str]:
    """The view's last lines, as jmp's: the status, where the session is kept, and the next
    command (copyable: `--sessions-dir` in it when the sessions are not where it looks)."""
    import shlex
    from pathlib import Path

    from kernel.store.catalog import sessions_home

    sid, where = data.get("session_id"), data.get("session_dir")
    if not sid or not where:
        return [f"[{data.get('status')}] session {sid}"]
    home = Path(str(where)).parent
    extra = [] if home == sessions_home() else ["--sessions-dir", str(home)]
    inspect = shlex.join(["jev-harness", "inspect", *extra, str(sid)])
    return [f"[{data.get('status')}] session {sid} · kept in {home}", f"  see it: {inspect}"]


def render(event: Any) -> str | None:
    """A readable line for the events a person follows; None for the rest."""
    d = event.data
    match event.kind:
        case "session":
            return f"session {d.session_id}"
        case "user":
            return f"goal: {_clip(d.text)}"
        case "route":
            return f"tool → {d.choice} ({_how(d)})"
        case "parameter":
            return f"  {d.question} → {d.choice} ({_how(d)})"
        case "tool_started":
            return f"▶ {d.tool} {_clip(d.target)}"
        case "tool_finished":
            return f"  {'✓' if d.status == 'ok' else '✗'} {d.tool}: {_clip(d.text)}"
        case "tool_uncertain":
            return f"? {d.tool}: outcome unknown ({d.cause})"
        case "receipt":
            return f"receipt: {d.path} match {d.match} records {d.record_count}"
        case "final":
            return f"\n{d.status}: {d.summary}"
        case "error":
            return f"error: {d.error_class}: {d.message}"
    return None


def _how(d: Any) -> str:
    verdict = "" if getattr(d, "accepted", True) else ", refused: below the threshold"
    return f"{d.method}, top {_p(d.top)}{verdict}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _clip(text: str) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= PREVIEW else one[: PREVIEW - 1] + "…"
