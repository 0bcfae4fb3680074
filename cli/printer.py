"""What the CLI prints: JSON lines on stdout with --json, else a readable live view.

Diagnostics go to stderr only. The protocol codec (msgspec) is imported on the first event, not
at import, so that `--list` and usage errors start fast. Every byte written passes `_write` or
`error`: the redactor (every key variable that is set, the MCP secrets once loaded, the token
formats) on both streams, and for a terminal `terminal_safe` (no escape sequence from a model,
a tool or a file name acts on it).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from kernel.display import terminal_safe
from kernel.store.catalog import is_session_id
from kernel.store.redact import Redactor, environment_secrets

if TYPE_CHECKING:
    from protocol.events import Event

PREVIEW_LINES = 6
PREVIEW_CHARS = 160
WAIT_SHOWN_AFTER_S = 0.5  # a shorter wait for a starting worker is not worth a line
WAITING_FOR = {"tool": "tools", "router": "the router", "generator": "the generator"}


class Printer:
    """Prints events as they happen and the final result; safe to call from any thread."""

    def __init__(
        self,
        json: bool,
        out: TextIO | None = None,
        err: TextIO | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.json = json
        # The run hands over the session's redactor once it exists (cli/run.py).
        self.redactor = redactor or Redactor(environment_secrets())
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.Lock()
        self._progress = False  # an overwritable progress line is on screen
        self._live = bool(getattr(self.out, "isatty", lambda: False)())
        self._final_shown = False  # the answer was printed as it happened
        self._waits: dict[str, threading.Timer] = {}
        self._wait_shown: str | None = None

    def event(self, event: Event) -> None:
        """One persisted or transient event: a JSON line, or a line of the live view."""
        with self._lock:
            if self.json:
                from protocol.codec import encode_event

                self._write(encode_event(event).decode() + "\n")
            elif event.kind in ("model_progress", "model_started"):
                self._show_progress(event)
            else:
                text = render(event)
                if text is not None:
                    self._final_shown = self._final_shown or event.kind == "final"
                    self._write(text + "\n")

    def result(self, data: dict[str, Any]) -> None:
        """The last line: `{"kind":"result",...}` with --json, else a one-line outcome."""
        with self._lock:
            sid = data.get("session_id")
            # An id that is not a session id is never echoed (`--session ../../etc/passwd`).
            data = {
                **data,
                "session_id": sid if isinstance(sid, str) and is_session_id(sid) else None,
            }
            data = self.redactor.value(data)
            if self.json:
                message = {
                    "version": 1,
                    "session_id": data["session_id"],
                    "seq": None,
                    "time": time.time(),
                    "kind": "result",
                    "data": data,
                }
                self._write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
            elif data.get("status") != "error" and data.get("session_id"):
                if not self._final_shown and data.get("summary"):  # e.g. a replayed answer
                    self._write(f"\n{data['summary']}\n\n")
                self._write(f"[{data.get('status')}] session {data['session_id']}\n")

    def note(self, text: str) -> None:
        """A diagnostic on stderr (both views): stdout stays what the run itself printed."""
        with self._lock:
            self._clear_progress()
            self._say(f"jmp: note: {text}\n")

    def error(self, exc: BaseException) -> None:
        """The error's message on stderr."""
        with self._lock:
            self._clear_progress()
            self._say(f"jmp: error: {exc}\n")

    def _say(self, text: str) -> None:
        """The one way onto stderr: redacted and terminal-safe (stderr is for people)."""
        self.err.write(terminal_safe(self.redactor.text(text)))
        self.err.flush()

    def worker_wait(self, kind: str, started: bool) -> None:
        """A worker-start wait began or ended (kernel/supervision/waits): a live view shows
        `starting tools…` once it has lasted WAIT_SHOWN_AFTER_S, and removes it when done."""
        if self.json or not self._live:
            return
        with self._lock:
            timer = self._waits.pop(kind, None)
            if timer is not None:
                timer.cancel()
            if started:
                timer = threading.Timer(WAIT_SHOWN_AFTER_S, self._show_wait, args=(kind,))
                timer.daemon = True
                self._waits[kind] = timer
                timer.start()
            elif self._wait_shown == kind:
                self._clear_progress()

    def _show_wait(self, kind: str) -> None:
        with self._lock:
            if kind not in self._waits:
                return  # it ended while the timer fired
            self.out.write(f"\r\033[K  starting {WAITING_FOR.get(kind, kind)}…")
            self.out.flush()
            self._progress, self._wait_shown = True, kind

    def _show_progress(self, event: Event) -> None:
        if not self._live:
            return  # a pipe or file gets no carriage-return animation
        data = event.data
        chars = getattr(data, "characters", None)
        what = f"{chars} characters" if chars is not None else "waiting"
        label = terminal_safe(self.redactor.text(f"{data.stage} · {data.model or 'model'}"))
        self.out.write(f"\r\033[K  {label}: {what}…")
        self.out.flush()
        self._progress = True

    def _clear_progress(self) -> None:
        if self._progress:
            self.out.write("\r\033[K")
            self.out.flush()
            self._progress, self._wait_shown = False, None

    def _write(self, text: str) -> None:
        """The one way onto stdout: redacted, and made inert for a terminal (readable view)."""
        self._clear_progress()
        text = self.redactor.text(text)
        self.out.write(text if self.json else terminal_safe(text))
        self.out.flush()


def render(event: Event) -> str | None:
    """The live-view line(s) for one event, or None for events the view leaves out."""
    d = event.data
    match event.kind:
        case "session":
            return f"session {d.session_id} · workspace {d.workspace}"
        case "user":
            return f"> {_clip(d.text)}"
        case "route" | "completion_review":
            return f"{event.kind.replace('_', ' ')} → {d.choice} ({d.confidence:.2f})"
        case "argument_offload":
            return f"  arguments for {d.tool} built in code (no generation call)"
        case "tool_started":
            return f"▶ {d.tool} {_clip(d.target)}"
        case "tool_finished":
            return _tool_finished(d)
        case "tool_uncertain":
            ack = "acknowledged" if d.acknowledged else "not acknowledged"
            return f"? {d.tool} {_clip(d.target)}: outcome unknown ({d.cause}, {ack})"
        case "compaction":
            return f"compacted for {d.audience} through seq {d.through} → {d.checkpoint}"
        case "final":
            return f"\n{d.summary}\n"
        case "error":
            return f"error in {d.stage}: {d.error_class}: {d.message}"
        case "cleanup_warning":
            return f"warning: {d.error_class} {d.message}".rstrip()
    return None  # run_started, usage, unknown kinds


def _tool_finished(d: Any) -> str:
    mark = "✓" if d.status == "ok" else "✗"
    code = "" if d.exit_code is None else f" exit {d.exit_code}"
    head = f"  {mark} {d.tool} {d.status}{code}"
    lines = [line[:PREVIEW_CHARS] for line in d.text.splitlines()[:PREVIEW_LINES]]
    return "\n".join([head, *("    " + line for line in lines)])


def _clip(text: str) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= PREVIEW_CHARS else one[: PREVIEW_CHARS - 1] + "…"
