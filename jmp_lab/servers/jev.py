"""A loopback Jev-compatible server (`POST /v1/systemone`, `GET /v1/models`) for tests and demos.

It passes `jevcompat test` as conformant. Answers come from a script (question id -> label or
probabilities), else from a deterministic hash of (state, instructions, option) that never sees
the question id, the other questions or their order. Faults are injected per request.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import math
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from jmp_lab.servers.common import Faults, LoopbackServer, Recorder, read_body
from jmp_lab.servers.jev_schema import validation_errors

MODELS = [
    {"name": "jev-latest", "description": "jmp loopback test server", "release_date": "2026-01-01"}
]
FAULT_KINDS = ("http500", "invalid_json", "delay", "drop", "answer")
SCRIPTED_TOP = 0.9  # probability given to a scripted label; the rest is spread evenly


def choice_confidence(probs: list[float]) -> float:
    """The spec's reference formula: (max p - 1/n) / (1 - 1/n)."""
    n = len(probs)
    return 1.0 if n <= 1 else max(0.0, (max(probs) - 1 / n) / (1 - 1 / n))


def _score_confidence(probs: list[float]) -> float:
    n = len(probs)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=lambda i: probs[i])
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return max(0.0, 1 - spread / uniform)


def _logit(*parts: Any) -> float:
    canon = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canon.encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") / 2**64 * 2 - 1) * 3


def _softmax(xs: list[float]) -> list[float]:
    top = max(xs)
    es = [math.exp(x - top) for x in xs]
    total = sum(es)
    return [e / total for e in es]


def _choice_answer(names: list[str], probs: list[float]) -> dict[str, Any]:
    best = max(range(len(names)), key=lambda i: probs[i])
    return {
        "type": "choice",
        "choice": names[best],
        "probabilities": dict(zip(names, probs, strict=True)),
        "confidence": choice_confidence(probs),
    }


def default_answer(state: Any, question: dict[str, Any]) -> dict[str, Any]:
    """The deterministic answer: depends on state, instructions and options only."""
    ins, crit = question.get("instructions"), question.get("criteria")
    if question["type"] == "noul":
        return {"type": "noul", "noul": 1 / (1 + math.exp(-_logit(state, ins, crit)))}
    if question["type"] == "choice":
        names = list(crit)
        return _choice_answer(names, _softmax([_logit(state, ins, n, crit[n]) for n in names]))
    probs = _softmax([_logit(state, ins, i, level) for i, level in enumerate(crit)])
    return {
        "type": "score",
        "score": sum(i * p for i, p in enumerate(probs)),
        "legend": {str(i): level for i, level in enumerate(crit)},
        "probabilities": {str(i): p for i, p in enumerate(probs)},
        "confidence": _score_confidence(probs),
    }


def scripted_probabilities(names: list[str], want: str | dict[str, float]) -> list[float] | None:
    """Probabilities for a scripted label or dict, or None if it names no offered option."""
    if isinstance(want, str):
        if want not in names:
            return None
        rest = (1 - SCRIPTED_TOP) / (len(names) - 1) if len(names) > 1 else 0.0
        return [SCRIPTED_TOP if n == want else rest for n in names] if len(names) > 1 else [1.0]
    if not want or set(want) - set(names):
        return None
    given = sum(want.values())
    missing = [n for n in names if n not in want]
    fill = max(0.0, 1 - given) / len(missing) if missing else 0.0
    raw = [float(want.get(n, fill)) for n in names]
    total = sum(raw) or 1.0
    return [p / total for p in raw]


def _step_answers(step: dict[str, Any], questions: dict[str, Any]) -> dict[str, Any] | None:
    """Answers for every question a step names, or None if the step does not fit this request."""
    out: dict[str, Any] = {}
    for qid, want in step.items():
        question = questions.get(qid)
        if question is None:
            return None
        if question["type"] == "noul" and isinstance(want, int | float):
            out[qid] = {"type": "noul", "noul": min(1.0, max(0.0, float(want)))}
            continue
        if question["type"] != "choice":
            return None
        probs = scripted_probabilities(list(question["criteria"]), want)
        if probs is None:
            return None
        out[qid] = _choice_answer(list(question["criteria"]), probs)
    return out


def break_answer(answer: dict[str, Any], patch: dict[str, Any]) -> None:
    """Apply an `answer` fault: `choice` / `confidence` / `probabilities` replace the answer's
    own, `add` sets (or adds) some labels' probabilities, `drop` removes labels. Nothing is
    normalised: the point is an answer outside the API's rules."""
    for key in ("choice", "confidence", "probabilities"):
        if key in patch:
            answer[key] = patch[key]
    answer["probabilities"].update(patch.get("add", {}))
    for label in patch.get("drop", ()):
        answer["probabilities"].pop(label, None)


class JevState:
    """The server's script, faults and request record, shared by its handler threads."""

    def __init__(self, script: list[dict[str, Any]] | None = None, key: str | None = None) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.steps: list[dict[str, Any]] = list(script or [])
        self.faults = Faults(FAULT_KINDS)
        self.recorder = Recorder()
        self.unmatched = 0  # requests that met a pending step that did not fit them
        # Once the script is used up: a step for a request (`jmp-demo --serve`'s echo policy),
        # else None and the default answer.
        self.fallback: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer a valid request: the next script step if it fits, defaults for the rest."""
        questions = body["questions"]
        with self.lock:
            scripted = _step_answers(self.steps[0], questions) if self.steps else None
            if scripted is not None:
                self.steps.pop(0)
            elif self.steps:
                self.unmatched += 1
            elif self.fallback is not None:
                step = self.fallback(body)
                scripted = _step_answers(step, questions) if step else None
        answers = {
            qid: (scripted or {}).get(qid) or default_answer(body["state"], q)
            for qid, q in questions.items()
        }
        size = len(json.dumps(body, ensure_ascii=False))
        usage = {"input_tokens": size // 4, "output_tokens": 2 * len(answers)}
        return {"model": body["model"], "answers": answers, "usage": usage}


class JevHandler(BaseHTTPRequestHandler):
    """HTTP front of JevState; errors use the spec's shapes."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stalls
    state: JevState

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `.requests` instead."""

    def _send(self, status: int, payload: Any, raw: bytes | None = None, **headers: str) -> None:
        data = raw if raw is not None else json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, error_type: str, message: str) -> None:
        self._send(status, {"detail": {"error_type": error_type, "message": message}})

    def _refused(self) -> bool:
        """Bearer auth when the server has a key: missing -> 403, wrong -> 401."""
        key = self.state.key
        if key is None:
            return False
        header = self.headers.get("Authorization") or ""
        given = header[7:] if header.startswith("Bearer ") else ""
        if not given:
            self._error(403, "authentication_error", "Must supply an API key.")
        elif not hmac.compare_digest(given.encode(), key.encode()):
            self._error(401, "authentication_error", "Cannot authenticate with the server.")
        return given != key

    def do_GET(self) -> None:
        self.state.recorder.add(self, None)
        if self._refused():
            return
        if self.path.split("?")[0] == "/v1/models":
            self._send(200, {"models": MODELS})
        else:
            self._error(404, "not_found", f"No route {self.path}")

    def do_POST(self) -> None:
        raw = read_body(self)
        self.state.recorder.add(self, raw)
        if self.path.split("?")[0] != "/v1/systemone":
            self._error(404, "not_found", f"No route {self.path}")
            return
        self.patch: dict[str, Any] | None = None
        if self._refused() or self._inject_fault():
            return
        if (self.headers.get("Content-Encoding") or "identity").lower() != "identity":
            self._error(415, "api_usage_error", "Content-Encoding is not supported here")
            return
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            loc = ["body", getattr(exc, "pos", 0)]
            self._send(
                422, {"detail": [{"loc": loc, "msg": "JSON decode error", "type": "json_invalid"}]}
            )
            return
        errors = validation_errors(body)
        if errors:
            self._send(422, {"detail": errors})
            return
        reply = self.state.respond(body)
        if self.patch is not None:
            for answer in reply["answers"].values():
                if answer.get("type") == "choice":
                    break_answer(answer, self.patch)
        self._send(200, reply)

    def _inject_fault(self) -> bool:
        """Apply the next pending fault; True when the request is fully handled by it."""
        fault = self.state.faults.take()
        if fault is None:
            return False
        if fault.kind == "delay":
            time.sleep(fault.seconds)
            return False
        if fault.kind == "answer":
            self.patch = dict(fault.answer or {})
            return False
        if fault.kind == "http500":
            # retry-after-ms keeps the SDK's real retries fast in tests.
            body = {"detail": {"error_type": "internal_error", "message": "injected fault"}}
            self._send(500, body, retry_after_ms=str(fault.retry_after_ms))
        elif fault.kind == "invalid_json":
            self._send(200, None, raw=b'{"model": "jev-latest", "answers": {')
        else:  # drop: no response at all
            self.close_connection = True
            self.connection.close()
        return True


class JevServer(LoopbackServer):
    """`with JevServer(script) as jev:` a Jev-compatible server on 127.0.0.1 at `jev.url`."""

    def __init__(
        self, script: list[dict[str, Any]] | None = None, port: int = 0, key: str | None = None
    ) -> None:
        self.state = JevState(script, key)
        self._serve(JevHandler, port)

    @property
    def url(self) -> str:
        """Server root, as TYPESAFE_BASE_URL (the SDK appends /v1/systemone)."""
        return self.address

    def systemone_bodies(self) -> list[Any]:
        """The parsed bodies of POST /v1/systemone requests, in arrival order."""
        return [r["body"] for r in self.requests if r["path"] == "/v1/systemone"]

    def script(self, steps: list[dict[str, Any]]) -> None:
        """Append steps: each maps question id -> label, probabilities dict, or (noul) a number."""
        with self.state.lock:
            self.state.steps.extend(steps)

    @property
    def pending_steps(self) -> int:
        with self.state.lock:
            return len(self.state.steps)

    def fault(
        self,
        kind: str,
        count: int = 1,
        seconds: float = 0.0,
        retry_after_ms: int = 10,
        answer: dict[str, Any] | None = None,
    ) -> None:
        """Inject `kind` (http500, invalid_json, delay, drop, answer) into the next POSTs."""
        self.state.faults.add(
            kind, count, seconds=seconds, retry_after_ms=retry_after_ms, answer=answer
        )


def main(argv: list[str] | None = None) -> int:
    """`python -m jmp_lab.servers.jev --port N --script FILE.json`: serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m jmp_lab.servers.jev")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--script", type=Path, help="JSON list of steps")
    parser.add_argument("--key", help="require this Bearer key (default: no auth)")
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text(encoding="utf-8")) if args.script else None
    server = JevServer(script, port=args.port, key=args.key)
    return server.serve_until_interrupted("jev test server")


if __name__ == "__main__":
    raise SystemExit(main())
