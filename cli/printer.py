"""What the CLI prints: JSON lines on stdout with --json, else a readable live view.

Diagnostics go to stderr only. The protocol codec (msgspec) is imported on the first event, not
at import, so that `--list` and usage errors start fast. Every byte written passes `_write`,
`_draw` or `_say`: the redactor (every key variable that is set, the MCP secrets once loaded,
the token formats) on both streams, and for a terminal `terminal_safe` (no escape sequence from
a model, a tool or a file name acts on it).

On a terminal the view keeps a status block at its bottom, redrawn in place: a model's
progress, a worker it waits for, or a running tool call (its time so far, refreshed every
second, and the newest lines of its output). Into a pipe or a file none of that is written.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cli.render import closing, fit, render, running
from kernel.display import json_line, shown_result, terminal_safe
from kernel.store.redact import Redactor, environment_secrets

if TYPE_CHECKING:
    from protocol.events import Event
    from protocol.messages import ToolProgress

__all__ = ["Printer", "render"]

WAIT_SHOWN_AFTER_S = 0.5  # a shorter wait for a starting worker is not worth a line
TOOL_SHOWN_AFTER_S = 1.0  # a call that ends sooner shows no status block
REFRESH_S = 1.0  # a running call's time is redrawn this often
WAITING_FOR = {"tool": "tools", "router": "the router", "generator": "the generator"}
_ENDS_A_CALL = ("tool_finished", "tool_uncertain", "final", "error")


class _Call:
    """The tool call running now, as the view knows it."""

    def __init__(self, call_id: str, tool: str) -> None:
        self.call_id, self.tool = call_id, tool
        self.started = time.monotonic()
        self.progress: ToolProgress | None = None


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
        self._progress = 0  # lines of the status block on screen (redrawn in place)
        self._live = bool(getattr(self.out, "isatty", lambda: False)())
        self._final_shown = False  # the answer was printed as it happened
        self._waits: dict[str, threading.Timer] = {}
        self._wait_started: dict[str, float] = {}
        self._wait_shown: str | None = None
        self._call: _Call | None = None
        self._ticker: threading.Thread | None = None
        self._seen_session = False  # an event of a session was printed: the run got that far
        self.session_id: str | None = None  # that session's: an error's result line names it
        self._interrupted: set[str] = set()  # calls left uncertain and not acknowledged
        self._unfinished: str | None = None  # a call begun and not finished (or exit_code -1)
        self.home: str | None = None  # where the run's sessions are kept (cli/run.py says)
        self.home_args: list[str] = []  # `--sessions-dir H` when H is not the default

    @property
    def session_dir(self) -> str | None:
        """The directory of the session this run's records came from (None before any)."""
        if self.session_id is None or self.home is None:
            return None
        return str(Path(self.home) / self.session_id)

    def locate(self, home: Path) -> None:
        """The sessions home of this run: the closing lines say it, and put `--sessions-dir`
        into the next command when it is not where jmp looks by default."""
        from kernel.config.install import default_sessions_dir

        self.home = str(home)
        default = default_sessions_dir()
        self.home_args = [] if Path(home) == default else ["--sessions-dir", str(home)]

    def event(self, event: Event) -> None:
        """One persisted or transient event: a JSON line, or a line of the live view."""
        with self._lock:
            self._seen_session = self._seen_session or event.seq is not None
            if self.session_id is None and event.seq is not None:
                self.session_id = event.session_id
            if self.json:
                from protocol.codec import encode_event

                self._write(encode_event(event).decode() + "\n")
                return
            if event.kind in ("model_progress", "model_started"):
                self._show_progress(event)
                return
            if event.kind == "tool_progress":  # a terminal has the running call's ticker
                if not self._live:
                    self._write(f"  … {event.data.tool} running {event.data.elapsed_s:.0f} s\n")
                return
            self._follow(event)
            text = render(event)
            if text is not None:
                self._final_shown = self._final_shown or event.kind == "final"
                self._write(text + "\n")

    def _follow(self, event: Event) -> None:
        """What the view remembers: the call running, the calls left uncertain."""
        data = event.data
        if event.kind == "tool_started" and self._live:
            self._call = _Call(data.call_id, data.tool)
            self._start_ticker()
        elif event.kind in _ENDS_A_CALL:
            self._call = None
        if event.kind == "tool_started":
            self._unfinished = data.call_id
        elif event.kind == "tool_finished":
            self._unfinished = data.call_id if data.exit_code == -1 else None
        if event.kind == "tool_uncertain":
            if data.acknowledged:
                self._interrupted.discard(data.call_id)
            else:
                self._interrupted.add(data.call_id)

    def tool_output(self, progress: ToolProgress) -> None:
        """A running call's output so far (kernel/supervision/tools.py `on_output`): its
        status block shows the newest lines; never on a pipe, never with --json."""
        if self.json or not self._live:
            return
        with self._lock:
            call = self._call
            if call is not None and progress.reply_to == call.call_id:
                call.progress = progress
                self._show_call()

    def _start_ticker(self) -> None:
        if self._ticker is not None:
            return

        def tick() -> None:
            while True:
                time.sleep(REFRESH_S / 4)
                with self._lock:
                    if self._call is None:
                        self._draw_wait()
                    else:
                        self._show_call()

        self._ticker = threading.Thread(target=tick, name="view-ticker", daemon=True)
        self._ticker.start()

    def _show_call(self) -> None:
        """Redraw the running call's block (under the lock) once it has run a moment."""
        call = self._call
        if call is None:
            return
        seconds = time.monotonic() - call.started
        if seconds < TOOL_SHOWN_AFTER_S:
            return
        self._draw(running(call.tool, seconds, call.progress))

    def result(self, data: dict[str, Any]) -> None:
        """The last line: `{"kind":"result",...}` with --json, else a one-line outcome."""
        with self._lock:
            if self.json:  # the one writer of the line (kernel/display.py)
                self._write(json_line("result", data, self.redactor) + "\n")
                return
            data = shown_result(data, self.redactor)  # an id that is none is never echoed
            if data.get("session_id") and (data.get("status") != "error" or self._seen_session):
                # An error before the session was reached (a usage error, a busy lock) has
                # its one line on stderr, which names the next step.
                if not self._final_shown and data.get("summary") and data["status"] != "error":
                    self._write(f"\n{data['summary']}\n\n")  # e.g. a replayed answer
                uncertain = bool(self._interrupted) or self._unfinished is not None
                lines = closing(data, self.home, self.home_args, uncertain)
                self._write("\n".join(lines) + "\n")

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
                self._wait_started[kind] = time.monotonic()
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
            self._wait_shown = kind
            self._draw_wait()
            self._start_ticker()  # the time so far, refreshed

    def _draw_wait(self) -> None:
        """`starting tools… 3 s` (under the lock): what keeps the run waiting, and how long."""
        kind = self._wait_shown
        if kind is None or kind not in self._waits:
            return
        seconds = time.monotonic() - self._wait_started.get(kind, time.monotonic())
        self._draw([f"  starting {WAITING_FOR.get(kind, kind)}… {seconds:.0f} s"])
        self._wait_shown = kind  # _draw's clearing forgets it

    def _show_progress(self, event: Event) -> None:
        if not self._live:
            return  # a pipe or file gets no carriage-return animation
        data = event.data
        chars = getattr(data, "characters", None)
        what = f"{chars} characters" if chars is not None else "waiting"
        self._draw([f"  {data.stage} · {data.model or 'model'}: {what}…"])

    def _draw(self, lines: list[str]) -> None:
        """The status block, in place of the one on screen (live view only): each line
        redacted, made inert and cut to the terminal's width, so that none wraps."""
        columns = self._columns() - 1
        shown = [fit(terminal_safe(self.redactor.text(line)), columns) for line in lines]
        if self._progress:
            self._clear_progress()  # the cursor is then at the start of the block's first line
        else:
            self.out.write("\r\033[K")
        self.out.write("\n".join(shown))
        self.out.flush()
        self._progress = len(shown)

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self.out.fileno()).columns
        except (OSError, ValueError, AttributeError):
            return int(os.environ.get("COLUMNS", "") or 80)

    def _clear_progress(self) -> None:
        if self._progress:
            self.out.write("\r\033[K" + "\033[A\r\033[K" * (self._progress - 1))
            self.out.flush()
            self._progress, self._wait_shown = 0, None

    def _write(self, text: str) -> None:
        """The one way onto stdout: redacted, and made inert for a terminal (readable view)."""
        self._clear_progress()
        text = self.redactor.text(text)
        self.out.write(text if self.json else terminal_safe(text))
        self.out.flush()
