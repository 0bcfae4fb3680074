"""The generator worker: Flash through the official openai SDK, always streamed.

With a tool schema, Flash must call exactly one function, `selected_action`, and the reply carries
its parsed arguments; without one, the reply is streamed prose. Runnable as
`python -m workers.generator ENDPOINT`. Settings: FLASH_API_KEY (or DEEPSEEK_API_KEY),
FLASH_BASE_URL (default https://api.deepseek.com), FLASH_MODEL (default deepseek-v4-flash).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import httpx
import openai

from protocol.messages import Failed, Generate, Generated, ModelUsage, Msg, Progress
from protocol.redact import redact
from protocol.text import clean, first_surrogate
from workers.calls import Cancelled, stream_cancellable, unreachable

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-v4-flash"
TOOL_NAME = "selected_action"
MAX_RETRIES = 2  # modest: the run is resumable, a long silent retry loop is not
# read bounds the wait between chunks (providers send keep-alives while queued)
TIMEOUT = httpx.Timeout(connect=10.0, read=90.0, write=30.0, pool=10.0)
PROGRESS_EVERY_S = 0.1
# Output caps (JMP_FLASH_ANSWER_CHARS, JMP_FLASH_ARGUMENTS_CHARS): reading stops there (issue 9).
ANSWER_CHARS = 200_000
ARGUMENTS_CHARS = 1_000_000


def _cap(env: Mapping[str, str], name: str, default: int) -> int:
    """A positive whole number from the environment (the kernel refused bad ones already)."""
    try:
        value = int(env.get(name, "").strip() or default)
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class FlashSettings:
    """What the generator needs from the environment. The key never leaves this process."""

    api_key: str = field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    answer_chars: int = ANSWER_CHARS
    arguments_chars: int = ARGUMENTS_CHARS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FlashSettings:
        env = os.environ if env is None else env
        key = env.get("FLASH_API_KEY") or env.get("DEEPSEEK_API_KEY") or ""
        return cls(
            api_key=key.strip(),
            base_url=(env.get("FLASH_BASE_URL") or DEFAULT_BASE_URL).rstrip("/"),
            model=env.get("FLASH_MODEL") or DEFAULT_MODEL,
            answer_chars=_cap(env, "JMP_FLASH_ANSWER_CHARS", ANSWER_CHARS),
            arguments_chars=_cap(env, "JMP_FLASH_ARGUMENTS_CHARS", ARGUMENTS_CHARS),
        )

    @property
    def provider(self) -> str:
        """A provider name for usage records, from the base URL's host."""
        host = urlparse(self.base_url).hostname or ""
        for name in ("deepseek", "openai"):
            if host == f"{name}.com" or host.endswith(f".{name}.com"):
                return name
        return "openai-compatible"


def request_kwargs(request: Generate, model: str) -> dict[str, Any]:
    """The chat.completions.create arguments: streamed, thinking off, at most one forced tool."""
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        # DeepSeek's switch; other OpenAI-compatible servers ignore unknown body fields.
        "extra_body": {"thinking": {"type": "disabled"}},
    }
    if request.tool_schema is not None:
        function = {
            "name": TOOL_NAME,
            "description": request.tool_description,
            "parameters": request.tool_schema,
        }
        kwargs["tools"] = [{"type": "function", "function": function}]
        kwargs["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
        kwargs["parallel_tool_calls"] = False
    return kwargs


class Stream:
    """What a streamed reply has said so far: text or the first tool call's argument text,
    at most `limit` characters (`cut` says the model went on)."""

    def __init__(self, tool: bool, limit: int = ANSWER_CHARS) -> None:
        self.tool = tool
        self.limit = limit
        self.cut = False
        self.parts: list[str] = []
        self.characters = 0
        self.tool_name: str | None = None
        self.called = False
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] = {}

    def add(self, chunk: Any) -> None:
        """Fold one ChatCompletionChunk in."""
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = chunk.usage.model_dump(exclude_none=True)
        for choice in chunk.choices or ():
            self.finish_reason = choice.finish_reason or self.finish_reason
            if self.tool:
                self._add_calls(choice.delta.tool_calls or ())
            elif choice.delta.content:
                self._append(choice.delta.content)

    def _add_calls(self, calls: Any) -> None:
        for call in calls:
            if call.index not in (0, None):
                continue  # parallel calls are off; a stray second call is not ours to run
            self.called = True
            function = call.function
            if function is not None:
                self.tool_name = function.name or self.tool_name
                if function.arguments:
                    self._append(function.arguments)

    def _append(self, text: str) -> None:
        room = self.limit - self.characters
        if len(text) > room:
            text, self.cut = text[: max(room, 0)], True
        self.parts.append(text)
        self.characters += len(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def parse_arguments(stream: Stream) -> dict[str, Any] | str:
    """The tool call's arguments as an object, or why they are unusable."""
    if not stream.called:
        return f"the model made no {TOOL_NAME} call (finish_reason {stream.finish_reason!r})"
    if stream.tool_name not in (None, TOOL_NAME):
        return f"the model called {stream.tool_name!r}, not {TOOL_NAME!r}"
    try:
        value = json.loads(stream.text or "")
    except json.JSONDecodeError as exc:
        why = f"{exc.msg} at character {exc.pos} of {stream.characters}"
        return f"{TOOL_NAME} arguments are not valid JSON ({why})"
    if not isinstance(value, dict):
        return f"{TOOL_NAME} arguments are a JSON {type(value).__name__}, not an object"
    where = first_surrogate(value)
    if where:  # not valid Unicode: refused, never written to a file or run as a command
        return f"{TOOL_NAME} arguments hold a lone surrogate (invalid Unicode) at {where}"
    return value


class GeneratorHandler:
    """`handler(request, send, cancel) -> reply` for the generator worker."""

    def __init__(self, settings: FlashSettings) -> None:
        self.settings = settings
        self.client: openai.OpenAI | None = None
        self.startup_error = ""
        if not settings.api_key:
            self.startup_error = "FLASH_API_KEY (or DEEPSEEK_API_KEY) is not set"
            return
        self.client = openai.OpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            max_retries=MAX_RETRIES,
            timeout=TIMEOUT,
        )
        # openai imports its chat resources on first use (0.8 s here): at start, before Ready,
        # not inside the first request (a forked worker finds them preloaded by the pool).
        _ = self.client.chat.completions

    def __call__(self, request: Msg, send: Callable[[Msg], None], cancel: threading.Event) -> Msg:
        if not isinstance(request, Generate):
            name = type(request).__name__
            return Failed(reply_to=getattr(request, "id", None), code="bad_request", detail=name)
        if self.client is None:
            return Failed(reply_to=request.id, code="provider", detail=self.startup_error)
        return self.generate(request, send, cancel)

    def generate(
        self, request: Generate, send: Callable[[Msg], None], cancel: threading.Event
    ) -> Msg:
        """Stream one completion; Progress carries character counts, and an answer's new text
        (a request with no tool), never argument text."""
        client = self.client
        assert client is not None
        kwargs = request_kwargs(request, self.settings.model)
        tool = request.tool_schema is not None
        limits = self.settings
        stream = Stream(tool, limits.arguments_chars if tool else limits.answer_chars)
        started, last_progress = time.monotonic(), float("-inf")
        told = 0  # parts of an answer's text already sent (never an argument's)
        try:
            opened = stream_cancellable(lambda: client.chat.completions.create(**kwargs), cancel)
            with contextlib.closing(opened) as chunks:  # closing it closes the HTTP stream
                for chunk in chunks:
                    stream.add(chunk)
                    if stream.cut:
                        break  # the cap: stop reading
                    now = time.monotonic()
                    if stream.characters and now - last_progress >= PROGRESS_EVERY_S:
                        last_progress = now
                        text = "" if tool else clean("".join(stream.parts[told:]))
                        told = len(stream.parts)
                        send(
                            Progress(
                                reply_to=request.id,
                                stage=request.stage,
                                characters=stream.characters,
                                text=text,
                            )
                        )
        except Cancelled:
            return Failed(reply_to=request.id, code="cancelled", detail="cancelled while streaming")
        except (openai.OpenAIError, httpx.HTTPError, OSError, ValueError) as exc:
            return self._provider_failed(request, exc)
        return self._reply(request, stream, time.monotonic() - started)

    def close(self) -> None:
        """Release the SDK client's connections (the worker process just exits instead)."""
        if self.client is not None:
            self.client.close()

    def _provider_failed(self, request: Generate, exc: BaseException) -> Failed:
        where = unreachable(exc, "FLASH_BASE_URL", self.settings.base_url)
        detail = redact((str(exc) or repr(exc)) + where, self.settings.api_key)
        return Failed(
            reply_to=request.id, code="provider", detail=detail, error_class=type(exc).__name__
        )

    def _reply(self, request: Generate, stream: Stream, seconds: float) -> Msg:
        if stream.cut and stream.tool:
            detail = (
                f"{TOOL_NAME} arguments exceed {stream.limit} characters "
                "(JMP_FLASH_ARGUMENTS_CHARS); the stream was stopped there"
            )
            return Failed(reply_to=request.id, code="invalid_arguments", detail=detail)
        if (
            stream.finish_reason is None and not stream.cut
        ):  # the body ended without the model finishing
            detail = f"the stream ended early after {stream.characters} characters"
            return Failed(
                reply_to=request.id, code="provider", detail=detail, error_class="StreamCut"
            )
        usage = ModelUsage(
            provider=self.settings.provider,
            model=stream.model or self.settings.model,
            seconds=round(seconds, 6),
            usage=stream.usage,
        )
        if not stream.tool:
            text = clean(stream.text)  # a lone surrogate: never a failed write
            if stream.cut:
                text += (
                    f"\n\n[answer cut at {stream.limit} characters (JMP_FLASH_ANSWER_CHARS): "
                    "the model went on and the rest was not read]"
                )
            return Generated(reply_to=request.id, usage=usage, text=text)
        arguments = parse_arguments(stream)
        if isinstance(arguments, str):
            return Failed(
                reply_to=request.id, code="invalid_arguments", detail=arguments, usage=usage
            )
        return Generated(reply_to=request.id, usage=usage, arguments=arguments)


def main() -> None:
    """`python -m workers.generator ENDPOINT`: serve until Shutdown or the kernel is gone."""
    from workers.base import main_for  # late: the handler is testable without the loop

    main_for("generator", lambda _argv: GeneratorHandler(FlashSettings.from_env()))


if __name__ == "__main__":
    main()
