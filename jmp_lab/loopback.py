"""`jmp-demo --serve`: the loopback Jev and OpenAI-compatible servers, for a task of your own
without keys. It prints the `export` line to paste into another terminal and serves until
Ctrl+C.

The answers are scripted, never a model's: first the steps of an answers file you may edit while
it runs (`--answers FILE`, `{"jev": [...], "flash": [...]}` in the formats of
jmp_lab/servers/jev.py and flash.py; re-read whenever it changes), then the echo policy: each
new request gets one `ls -la` in its workspace, then `done`, and a final answer that quotes the
request and says that no model was asked.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

from jmp_lab.servers.flash import FlashServer, check_items
from jmp_lab.servers.jev import JevServer

JEV_PORT, FLASH_PORT = 8787, 8788  # fixed by default: the export line stays the same
KEY = "loopback-not-a-real-key"
LOOK = "ls -la"
_REQUEST = re.compile(
    r"== CURRENT REQUEST #(\d+) \(user, verbatim\) ==\n(.*?)(?=\n\n|\n== |\Z)", re.S
)
STARTER = {
    "jev": [],
    "flash": [],
    "example": {
        "what": "move these into jev and flash to script a write: Jev picks each tool (route), "
        "approves the end (completion_review); Flash writes each call's arguments, then the "
        "answer. Used in order; once used up, the echo policy answers.",
        "jev": [{"route": "write"}, {"route": "done"}, {"completion_review": "complete"}],
        "flash": [
            {"tool_call": {"arguments": {"path": "hello.py", "file_text": "print('hello')\n"}}},
            {"text": "Wrote hello.py (a scripted answer)."},
        ],
    },
}


def current_request(text: str) -> tuple[str, str] | None:
    """The (seq, text) of the CURRENT REQUEST section of a model request's context."""
    found = _REQUEST.search(text)
    return (found[1], found[2].strip()) if found else None


class EchoPolicy:
    """What the servers answer once the answers file is used up: per request, `ls -la`, then
    done and complete; Flash's answer quotes the request. Stateful only in the requests seen."""

    def __init__(self, answers: Path | None) -> None:
        self.answers = answers
        self.looked: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def jev(self, body: dict[str, Any]) -> dict[str, Any] | None:
        questions = body.get("questions") or {}
        if "completion_review" in questions:
            return {"completion_review": "complete"}
        if "route" not in questions:
            return None
        request = current_request(json.dumps(body.get("state"), ensure_ascii=False))
        request = request or current_request(str(body.get("state")))
        with self.lock:
            first = request is not None and request not in self.looked
            if request is not None:
                self.looked.add(request)
        return {"route": "bash" if first else "done"}

    def flash(self, body: dict[str, Any]) -> dict[str, Any] | None:
        tools = body.get("tools") or []
        if tools:
            schema = (tools[0].get("function") or {}).get("parameters") or {}
            if "command" in (schema.get("properties") or {}):
                return {"tool_call": {"arguments": {"command": LOOK}}}
            return None
        text = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
        request = current_request(text)
        asked = f"You asked: “{request[1][:300]}”. " if request else ""
        edit = f"edit {self.answers}" if self.answers else "start it with --answers FILE"
        return {
            "text": f"(A scripted loopback answer: no model was asked.) {asked}I ran `{LOOK}` in "
            f"the workspace and stopped there. With real keys, Jev picks the steps and Flash "
            f"writes them; to script other steps here, {edit}."
        }


def load_answers(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The answers file's Jev steps and Flash replies; a clear ValueError when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f'{path}: expected {{"jev": [...], "flash": [...]}}')
    jev, flash = data.get("jev", []), data.get("flash", [])
    if not isinstance(jev, list) or not all(isinstance(s, dict) for s in jev):
        raise ValueError(f'{path}: "jev" must be a list of steps (objects)')
    if not isinstance(flash, list):
        raise ValueError(f'{path}: "flash" must be a list of replies')
    return jev, flash


def _replace(jev: JevServer, flash: FlashServer, path: Path) -> str:
    steps, items = load_answers(path)
    check_items(items)  # before anything is replaced
    with jev.state.lock:
        jev.state.steps[:] = steps
    with flash.state.lock:
        flash.state.items[:] = items
    return f"{path}: {len(steps)} Jev step(s), {len(items)} Flash reply(ies) queued"


def serve(answers: Path | None, jev_port: int, flash_port: int) -> int:
    """Run both servers until Ctrl+C; 2 (with the reason) when a port or the file is unusable."""
    if answers is not None and not answers.exists():
        answers.write_text(json.dumps(STARTER, indent=2) + "\n", encoding="utf-8")
        print(f"wrote a starter answers file: {answers}")
    try:
        jev, flash = JevServer(port=jev_port), FlashServer(port=flash_port)
    except OSError as exc:
        print(
            f"jmp-demo --serve: cannot listen on 127.0.0.1 ({exc.strerror}): another "
            f"--serve running? Pick free ports: --jev-port 0 --flash-port 0",
            file=sys.stderr,
        )
        return 2
    policy = EchoPolicy(answers)
    jev.state.fallback, flash.state.fallback = policy.jev, policy.flash
    seen = None
    try:
        if answers is not None:
            print(_replace(jev, flash, answers))
            seen = answers.stat().st_mtime_ns
        env = {
            "TYPESAFE_BASE_URL": jev.url,
            "TYPESAFE_API_KEY": KEY,
            "FLASH_BASE_URL": flash.url,
            "FLASH_API_KEY": KEY,
        }
        print("Loopback Jev and Flash: answers are SCRIPTED, no model is asked. In another")
        print("terminal, paste this, then type a task of yours:")
        print(f"export {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())}")
        print('jmp "describe this project"')
        print("Serving until Ctrl+C.", flush=True)
        while True:
            threading.Event().wait(0.5)
            if answers is None:
                continue
            try:
                stamp = answers.stat().st_mtime_ns
                if stamp != seen:
                    seen = stamp
                    print(_replace(jev, flash, answers), flush=True)
            except (OSError, ValueError) as exc:
                print(f"answers file not used: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("stopped", flush=True)
        return 0
    except ValueError as exc:
        print(f"jmp-demo --serve: {exc}", file=sys.stderr)
        return 2
    finally:
        jev.close()
        flash.close()
