"""The router (Jev) and generator (Flash) workers against real loopback servers.

Handlers are called in-process with a list-appending `send` and a threading.Event; the last tests
run each worker as a real subprocess through kernel.supervision.supervisor.Worker.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from jmp_lab.servers.flash import FlashServer
from jmp_lab.servers.jev import JevServer, choice_confidence
from protocol.messages import Failed, Generate, Generated, Message, Progress, Route, Routed
from protocol.redact import redact
from workers.generator import FlashSettings, GeneratorHandler
from workers.router import JevSettings, RouterHandler

JEV_KEY = "ts-secret-7d1f0c9a"
FLASH_KEY = "sk-secret-4be2a1f8"
OPTIONS = {"read": "view a file", "edit": "change a file", "bash": "run", "done": "finish"}
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "file_text": {"type": "string"}},
    "required": ["path", "file_text"],
    "additionalProperties": False,
}
ARGUMENTS = {"path": "/work/notes.txt", "file_text": 'line one\nline two, with "quotes"\n' * 4}


def route(ident: str = "r1") -> Route:
    return Route(
        id=ident, question="route", instructions="Pick the next tool", options=OPTIONS, state="s"
    )


def generate(tool: bool = True, ident: str = "g1") -> Generate:
    messages = [Message(role="system", content="be brief"), Message(role="user", content="go")]
    if not tool:
        return Generate(id=ident, stage="respond", messages=messages)
    return Generate(
        id=ident,
        stage="generate",
        messages=messages,
        tool_name="write",
        tool_description="Create a file",
        tool_schema=SCHEMA,
    )


def wire_text(messages: list[Any]) -> str:
    """Messages as they would cross the wire, for secret and leak checks."""
    return "".join(msgspec.json.encode(m).decode() for m in messages)


def call(handler: Any, request: Any, cancel: threading.Event | None = None) -> tuple[Any, list]:
    sent: list[Any] = []
    return handler(request, sent.append, cancel or threading.Event()), sent


@pytest.fixture
def jev() -> Iterator[JevServer]:
    with JevServer() as server:
        yield server


@pytest.fixture
def router(jev: JevServer) -> Iterator[RouterHandler]:
    with closing(RouterHandler(JevSettings(api_key=JEV_KEY, base_url=jev.url))) as handler:
        yield handler


@pytest.fixture
def flash() -> Iterator[FlashServer]:
    with FlashServer() as server:
        yield server


@pytest.fixture
def generator(flash: FlashServer) -> Iterator[GeneratorHandler]:
    with closing(GeneratorHandler(FlashSettings(api_key=FLASH_KEY, base_url=flash.url))) as handler:
        yield handler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def jevcompat_mock() -> Iterator[str]:
    """`jevcompat mock` as a subprocess on a free port; its root URL once it answers."""
    port = free_port()
    argv = [str(Path(sys.executable).parent / "jevcompat"), "mock", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    try:
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "mock did not start"
                time.sleep(0.05)  # polling a port with a deadline, not synchronising on time
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- router ----------------------------------------------------------------------


def test_router_works_unchanged_against_jevcompat_mock(jevcompat_mock: str) -> None:
    with closing(RouterHandler(JevSettings(api_key=JEV_KEY, base_url=jevcompat_mock))) as handler:
        reply, sent = call(handler, route())
    assert isinstance(reply, Routed), reply
    assert reply.reply_to == "r1" and sent == []
    assert list(reply.probabilities) == list(OPTIONS)
    assert sum(reply.probabilities.values()) == pytest.approx(1.0)
    assert reply.choice == max(reply.probabilities, key=lambda k: reply.probabilities[k])
    assert reply.confidence == pytest.approx(choice_confidence(list(reply.probabilities.values())))
    assert reply.usage.provider == "typesafe"
    assert reply.usage.model == "jevcompat-mock-0.1"  # the model the response names
    assert reply.usage.usage["input_tokens"] > 0 and reply.usage.seconds > 0


def test_router_returns_scripted_choice_and_sends_one_choice_question(
    jev: JevServer, router: RouterHandler
) -> None:
    jev.script([{"route": "edit"}])
    reply, _ = call(router, route())
    assert isinstance(reply, Routed)
    assert reply.choice == "edit" and reply.probabilities["edit"] == pytest.approx(0.9)
    assert reply.usage.model == "jev-latest"
    (sent,) = jev.requests
    assert sent["headers"]["Authorization"] == f"Bearer {JEV_KEY}"
    assert "Content-Encoding" not in sent["headers"]  # plain JSON: any compatible server
    question = {"type": "choice", "instructions": "Pick the next tool", "criteria": OPTIONS}
    assert sent["body"] == {"model": "jev-latest", "state": "s", "questions": {"route": question}}


def test_router_retries_a_500_then_succeeds(jev: JevServer, router: RouterHandler) -> None:
    jev.fault("http500", count=2)
    jev.script([{"route": "bash"}])
    reply, _ = call(router, route())
    assert isinstance(reply, Routed) and reply.choice == "bash"
    assert len(jev.systemone_bodies()) == 3


def test_router_500_after_retries_is_failed_provider(jev: JevServer, router: RouterHandler) -> None:
    jev.fault("http500", count=5)
    reply, _ = call(router, route())
    assert isinstance(reply, Failed) and reply.reply_to == "r1"
    assert reply.code == "provider" and reply.error_class == "TypeSafeInternalServerError"
    assert "500" in reply.detail
    assert len(jev.systemone_bodies()) == 3  # one try and two retries, then it gave up


def test_router_invalid_json_is_failed_provider(jev: JevServer, router: RouterHandler) -> None:
    jev.fault("invalid_json")
    reply, _ = call(router, route())
    assert isinstance(reply, Failed) and reply.code == "provider" and reply.error_class


@pytest.mark.slow  # asserts a wall-clock bound
def test_router_cancel_while_jev_is_slow(jev: JevServer, router: RouterHandler) -> None:
    jev.fault("delay", seconds=3.0)
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    reply, _ = call(router, route(), cancel)
    assert isinstance(reply, Failed) and reply.code == "cancelled"
    assert time.monotonic() - started < 1.0


def test_router_without_key_names_the_variable() -> None:
    handler = RouterHandler(JevSettings.from_env({"TYPESAFE_BASE_URL": "http://127.0.0.1:9"}))
    reply, _ = call(handler, route())
    assert isinstance(reply, Failed) and "TYPESAFE_API_KEY" in reply.detail


def test_router_settings_defaults() -> None:
    settings = JevSettings.from_env({"TYPESAFE_API_KEY": "k"})
    assert (settings.base_url, settings.model) == ("https://api.typesafe.ai", "jev-latest")
    assert "k" not in repr(JevSettings(api_key="secret-key"))


def test_router_scrubs_a_key_echoed_by_the_provider(
    router: RouterHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typesafe_sdk import TypeSafeAPIConnectionError

    def echo(**_: Any) -> Any:  # a vendor edge that repeats the key back, as some proxies do
        raise TypeSafeAPIConnectionError(f"proxy refused Bearer {JEV_KEY}")

    monkeypatch.setattr(router.client, "system_one", echo)
    reply, _ = call(router, route())
    assert isinstance(reply, Failed) and reply.error_class == "TypeSafeAPIConnectionError"
    assert JEV_KEY not in wire_text([reply]) and "[REDACTED]" in reply.detail


# --- generator -------------------------------------------------------------------


def test_generator_reassembles_split_arguments(flash: FlashServer, generator: Any) -> None:
    flash.queue([{"tool_call": {"arguments": ARGUMENTS}}])
    reply, _ = call(generator, generate())
    assert isinstance(reply, Generated) and reply.arguments == ARGUMENTS and reply.text == ""
    assert reply.usage.provider == "openai-compatible" and reply.usage.model == "deepseek-v4-flash"
    assert reply.usage.usage["total_tokens"] > 0


def test_generator_request_forces_one_selected_action(flash: FlashServer, generator: Any) -> None:
    call(generator, generate())
    (body,) = flash.completions()
    function = {"name": "selected_action", "description": "Create a file", "parameters": SCHEMA}
    assert body["tools"] == [{"type": "function", "function": function}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "selected_action"}}
    assert body["parallel_tool_calls"] is False
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["thinking"] == {"type": "disabled"}
    assert body["model"] == "deepseek-v4-flash"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_generator_progress_carries_counts_only(flash: FlashServer, generator: Any) -> None:
    flash.queue([{"tool_call": {"arguments": ARGUMENTS}}])
    flash.fault("slow", seconds=0.015)  # ~20 chunks over ~0.3 s: several progress windows
    started = time.monotonic()
    reply, sent = call(generator, generate())
    elapsed = time.monotonic() - started
    assert isinstance(reply, Generated)
    assert sent and all(isinstance(m, Progress) for m in sent)
    counts = [m.characters for m in sent]
    # At most the characters streamed: the server sends json.dumps' text (192 here), not the
    # compact encoding (189), which a last window after the last chunk exceeded under load.
    assert counts == sorted(counts) and counts[-1] <= len(json.dumps(ARGUMENTS))
    assert len(sent) >= 2 and len(sent) <= elapsed / 0.1 + 1  # throttled to ~100 ms
    assert {(m.reply_to, m.stage) for m in sent} == {("g1", "generate")}
    progress_wire = wire_text(sent)
    assert "line one" not in progress_wire and "notes.txt" not in progress_wire


def test_generator_invalid_json_is_invalid_arguments(flash: FlashServer, generator: Any) -> None:
    flash.fault("invalid_json")
    reply, _ = call(generator, generate())
    assert isinstance(reply, Failed) and reply.code == "invalid_arguments"
    assert "not valid JSON" in reply.detail and "unterminated" not in reply.detail


def test_generator_without_a_tool_call_is_invalid_arguments(
    flash: FlashServer, generator: Any
) -> None:
    flash.queue([{"text": "I would rather chat."}])
    reply, _ = call(generator, generate())
    assert isinstance(reply, Failed) and reply.code == "invalid_arguments"
    assert "no selected_action call" in reply.detail


def test_generator_non_object_arguments_are_invalid(flash: FlashServer, generator: Any) -> None:
    flash.queue([{"tool_call": {"arguments": "[1, 2]"}}])
    reply, _ = call(generator, generate())
    assert isinstance(reply, Failed) and reply.code == "invalid_arguments"


def test_generator_500_after_retries_is_provider(flash: FlashServer, generator: Any) -> None:
    flash.fault("http500", count=5)
    reply, _ = call(generator, generate())
    assert isinstance(reply, Failed) and reply.code == "provider"
    assert reply.error_class == "InternalServerError" and "500" in reply.detail
    assert len(flash.completions()) == 3  # one try and two retries


def test_generator_cut_stream_is_provider(flash: FlashServer, generator: Any) -> None:
    flash.queue([{"tool_call": {"arguments": ARGUMENTS}}])
    flash.fault("cut", after_chunks=4)
    reply, _ = call(generator, generate())
    assert isinstance(reply, Failed) and reply.code == "provider" and reply.error_class
    assert len(flash.completions()) == 1  # a stream is not retried mid-way


@pytest.mark.slow  # asserts a wall-clock bound
def test_generator_cancel_during_slow_stream(flash: FlashServer, generator: Any) -> None:
    flash.queue([{"tool_call": {"arguments": ARGUMENTS}}])
    flash.fault("slow", seconds=0.3)
    cancel = threading.Event()
    replies: list[Any] = []

    def on_send(msg: Any) -> None:
        cancel.set()  # the first Progress proves the stream is flowing
        replies.append(time.monotonic())

    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(generator(generate(), on_send, cancel)))
    worker.start()
    worker.join(timeout=10)
    assert result and isinstance(result[0], Failed) and result[0].code == "cancelled"
    assert time.monotonic() - replies[0] < 1.0
    assert len(replies) == 1


def test_generator_prose_reply(flash: FlashServer, generator: Any) -> None:
    flash.queue([{"text": "The file now has two lines."}])
    reply, sent = call(generator, generate(tool=False))
    assert isinstance(reply, Generated) and reply.arguments is None
    assert reply.text == "The file now has two lines."
    (body,) = flash.completions()
    assert "tools" not in body and "tool_choice" not in body
    assert body["thinking"] == {"type": "disabled"} and body["stream"] is True
    assert all(m.stage == "respond" for m in sent)


def test_generator_without_key_names_the_variable() -> None:
    handler = GeneratorHandler(FlashSettings.from_env({}))
    reply, _ = call(handler, generate())
    assert isinstance(reply, Failed) and "FLASH_API_KEY" in reply.detail


def test_generator_settings_and_provider_names() -> None:
    assert FlashSettings.from_env({"DEEPSEEK_API_KEY": "d"}).api_key == "d"
    settings = FlashSettings.from_env({"FLASH_API_KEY": "f", "DEEPSEEK_API_KEY": "d"})
    assert (settings.api_key, settings.model) == ("f", "deepseek-v4-flash")
    assert settings.provider == "deepseek"
    assert (
        FlashSettings(api_key="x", base_url="http://127.0.0.1:1/v1").provider == "openai-compatible"
    )
    assert (
        FlashSettings(api_key="x", base_url="https://notdeepseek.com").provider
        == "openai-compatible"
    )


def test_generator_scrubs_a_key_echoed_by_the_provider(
    generator: GeneratorHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    def echo(**_: Any) -> Any:  # a vendor edge that repeats the key back
        raise openai.OpenAIError(f"Incorrect API key provided: {FLASH_KEY}")

    assert generator.client is not None
    monkeypatch.setattr(generator.client.chat.completions, "create", echo)
    reply, _ = call(generator, generate())
    assert isinstance(reply, Failed) and reply.code == "provider"
    assert FLASH_KEY not in wire_text([reply])


def test_keys_never_appear_in_any_reply(flash: FlashServer, generator: Any, router: Any) -> None:
    flash.queue([{"tool_call": {"arguments": ARGUMENTS}}, {"text": "ok"}])
    flash.fault("http500", count=3)
    outputs: list[Any] = []
    for request in (generate(), generate(), generate(tool=False)):
        reply, sent = call(generator, request)
        outputs += [reply, *sent]
    outputs.append(call(router, route())[0])
    text = wire_text(outputs)
    assert FLASH_KEY not in text and JEV_KEY not in text
    assert redact(f"a {FLASH_KEY} b", FLASH_KEY, "") == "a [REDACTED] b"


# --- as real subprocesses ----------------------------------------------------------

HAVE_SUPERVISOR = all(
    importlib.util.find_spec(m) for m in ("workers.base", "kernel.supervision.supervisor")
)


@pytest.mark.skipif(
    not HAVE_SUPERVISOR, reason="workers.base or kernel.supervision.supervisor not written yet"
)
def test_router_and_generator_as_subprocesses(
    short_tmp: Path, jev: JevServer, flash: FlashServer
) -> None:
    from kernel.supervision.supervisor import Cancelled, Worker

    env = {
        "TYPESAFE_API_KEY": JEV_KEY,
        "TYPESAFE_BASE_URL": jev.url,
        "FLASH_API_KEY": FLASH_KEY,
        "FLASH_BASE_URL": flash.url,
    }
    jev.script([{"route": "read"}])
    flash.queue([{"tool_call": {"arguments": ARGUMENTS}}, {"tool_call": {"arguments": ARGUMENTS}}])
    with (
        Worker("router", short_tmp, env=env) as router_proc,
        Worker("generator", short_tmp, env=env) as generator_proc,
    ):
        router_proc.start()
        generator_proc.start()
        assert router_proc.wait_ready(60).worker == "router"
        routed = router_proc.request(route(), timeout_s=30)
        assert isinstance(routed, Routed) and routed.choice == "read"
        progress: list[Progress] = []
        generated = generator_proc.request(generate(), on_progress=progress.append, timeout_s=30)
        assert isinstance(generated, Generated) and generated.arguments == ARGUMENTS
        assert progress and progress[-1].characters > 0
        flash.fault("slow", seconds=0.3)
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        with pytest.raises(Cancelled):
            generator_proc.request(generate(ident="g2"), cancel=cancel, timeout_s=30)
        assert generator_proc.alive  # it stopped the stream itself; nothing was killed
