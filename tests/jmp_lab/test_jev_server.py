"""The loopback Jev server: conformance (jevcompat), scripts, faults, request record, CLI."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from jmp_lab.servers.jev import JevServer, choice_confidence

ROOT = Path(__file__).resolve().parents[2]
JEVCOMPAT = Path(sys.executable).parent / "jevcompat"
OPTIONS = {"read": "look at a file", "edit": "change a file", "done": "finish"}


def post(url: str, body: Any, path: str = "/v1/systemone", **headers: str) -> tuple[int, Any]:
    """One raw POST; (status, parsed JSON or raw text)."""
    parts = urlparse(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, raw, {"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except json.JSONDecodeError:
        return resp.status, data.decode("utf-8", "replace")


def route_body(state: str = "the user wants a change", qid: str = "route") -> dict[str, Any]:
    question = {"type": "choice", "instructions": "Pick the next tool", "criteria": OPTIONS}
    return {"model": "jev-latest", "state": state, "questions": {qid: question}}


def jevcompat_report(url: str, directory: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run the jevcompat CLI against `url`; (process, its JSON report)."""
    out = directory / "report.json"
    argv = [str(JEVCOMPAT), "test", url, "--timeout", "20", "--json", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=100, check=False)
    return proc, json.loads(out.read_text()) if out.exists() else {}


@pytest.fixture
def jev() -> Any:
    with JevServer() as server:
        yield server


def test_jevcompat_cli_says_conformant(jev: JevServer, short_tmp: Path) -> None:
    proc, report = jevcompat_report(jev.url, short_tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert report["summary"]["verdict"] == "conformant"
    failed = [r["id"] for r in report["results"] if r["status"] == "fail"]
    assert failed == []
    passed = {r["id"] for r in report["results"] if r["status"] == "pass"}
    assert {"confidence.formula", "semantics.question-id", "dropin.sdk-python"} <= passed
    assert len(jev.systemone_bodies()) > 20  # it really talked to us


def test_jevcompat_with_bearer_key_passes_auth_checks() -> None:
    from jevcompat import runner

    with JevServer(key="k-123") as server:
        report = runner.run(server.url, key="k-123", timeout=20.0)
        status = {r.id: r.status for r in report.results}
        assert report.verdict == "conformant"
        assert status["auth.missing"] == status["auth.invalid"] == status["auth.bearer"] == "pass"
        assert post(server.url, route_body())[0] == 403
        assert post(server.url, route_body(), Authorization="Bearer wrong")[0] == 401
        status_code, body = post(server.url, route_body(), Authorization="Bearer k-123")
        assert status_code == 200 and set(body["answers"]) == {"route"}


def test_scripted_label_gets_top_probability_and_formula_confidence(jev: JevServer) -> None:
    jev.script([{"route": "edit"}, {"route": {"done": 0.6, "read": 0.3}}])
    _, first = post(jev.url, route_body())
    _, second = post(jev.url, route_body())
    a, b = first["answers"]["route"], second["answers"]["route"]
    assert a["choice"] == "edit" and a["probabilities"]["edit"] == pytest.approx(0.9)
    assert set(a["probabilities"]) == set(OPTIONS)
    assert sum(a["probabilities"].values()) == pytest.approx(1.0)
    assert a["confidence"] == pytest.approx(choice_confidence(list(a["probabilities"].values())))
    assert b["choice"] == "done"
    assert b["probabilities"] == pytest.approx({"done": 0.6, "read": 0.3, "edit": 0.1})
    assert jev.pending_steps == 0


def test_exhausted_script_falls_back_to_deterministic_default(jev: JevServer) -> None:
    jev.script([{"route": "done"}])
    post(jev.url, route_body())
    _, one = post(jev.url, route_body())
    _, two = post(jev.url, route_body(qid="renamed"))
    assert one["answers"]["route"] == two["answers"]["renamed"]  # id-blind and repeatable
    _, other_state = post(jev.url, route_body(state="something else entirely"))
    assert other_state["answers"]["route"] != one["answers"]["route"]


def test_step_that_does_not_fit_is_kept_for_a_later_request(jev: JevServer) -> None:
    jev.script([{"completion_review": "complete"}])
    _, routed = post(jev.url, route_body())
    assert jev.pending_steps == 1 and jev.state.unmatched == 1
    review = {
        "type": "choice",
        "instructions": "Is the work complete?",
        "criteria": {"complete": None, "work_remains": None, "blocked": None},
    }
    body = {"model": "jev-latest", "state": "s", "questions": {"completion_review": review}}
    _, reviewed = post(jev.url, body)
    assert reviewed["answers"]["completion_review"]["choice"] == "complete"
    assert jev.pending_steps == 0
    assert routed["answers"]["route"]["choice"] in OPTIONS


def test_label_not_offered_is_not_used(jev: JevServer) -> None:
    jev.script([{"route": "bash"}])
    _, body = post(jev.url, route_body())
    assert body["answers"]["route"]["choice"] in OPTIONS
    assert jev.pending_steps == 1


def test_http500_fault_counts_down_then_recovers(jev: JevServer) -> None:
    jev.fault("http500", count=2)
    statuses = [post(jev.url, route_body())[0] for _ in range(3)]
    assert statuses == [500, 500, 200]


def test_invalid_json_and_drop_faults(jev: JevServer) -> None:
    jev.fault("invalid_json")
    jev.fault("drop")
    status, text = post(jev.url, route_body())
    assert status == 200 and isinstance(text, str) and text.startswith('{"model"')
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        post(jev.url, route_body())
    assert post(jev.url, route_body())[0] == 200


def test_delay_fault_delays_the_answer(jev: JevServer) -> None:
    jev.fault("delay", seconds=0.3)
    started = time.monotonic()
    status, _ = post(jev.url, route_body())
    assert status == 200 and time.monotonic() - started >= 0.3


def test_unknown_fault_is_refused(jev: JevServer) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        jev.fault("explode")


def test_invalid_requests_get_422_with_detail(jev: JevServer) -> None:
    status, body = post(jev.url, {"model": "jev-latest", "questions": {}})
    assert status == 422 and {tuple(d["loc"]) for d in body["detail"]} >= {("body", "state")}
    status, body = post(jev.url, b"{not json")
    assert status == 422 and body["detail"][0]["type"] == "json_invalid"


def test_records_every_request_with_headers(jev: JevServer) -> None:
    post(jev.url, route_body(), Authorization="Bearer abc")
    post(jev.url, {"x": 1}, path="/v1/nowhere")
    recorded = jev.requests
    assert [r["path"] for r in recorded] == ["/v1/systemone", "/v1/nowhere"]
    assert recorded[0]["headers"]["Authorization"] == "Bearer abc"
    assert recorded[0]["body"]["questions"]["route"]["criteria"] == OPTIONS


def test_cli_serves_a_script_file(short_tmp: Path) -> None:
    script = short_tmp / "script.json"
    script.write_text(json.dumps([{"route": "read"}]))
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "jmp_lab.servers.jev",
        "--port",
        str(port),
        "--script",
        str(script),
    ]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        _, body = post(f"http://127.0.0.1:{port}", route_body())
        assert body["answers"]["route"]["choice"] == "read"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
