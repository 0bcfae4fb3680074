"""The router worker: one Jev `choice` question per Route, through the official typesafe-sdk.

Runnable as `python -m workers.router ENDPOINT`. Settings come from the environment:
TYPESAFE_API_KEY, TYPESAFE_BASE_URL (default https://api.typesafe.ai), JEV_MODEL (jev-latest).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
from typesafe_sdk import Choice, RetryPolicy, TypeSafeClient, TypeSafeError

from protocol.messages import Failed, ModelUsage, Msg, Route, Routed
from protocol.redact import redact
from workers import tls
from workers.calls import Cancelled, call_cancellable, unreachable

DEFAULT_BASE_URL = "https://api.typesafe.ai"
DEFAULT_MODEL = "jev-latest"
MAX_RETRIES = 2  # modest: a dead router should surface quickly, the run is resumable
TIMEOUT_S = 30.0  # per HTTP operation
RETRY_BUDGET_S = 60.0  # the SDK stops retrying past this, whatever MAX_RETRIES says


@dataclass(frozen=True)
class JevSettings:
    """What the router needs from the environment. The key never leaves this process."""

    api_key: str = field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> JevSettings:
        env = os.environ if env is None else env
        return cls(
            api_key=env.get("TYPESAFE_API_KEY", "").strip(),
            base_url=(env.get("TYPESAFE_BASE_URL") or DEFAULT_BASE_URL).rstrip("/"),
            model=env.get("JEV_MODEL") or DEFAULT_MODEL,
        )


# The SDK's own connection limits (typesafe_sdk._core.config.DEFAULT_LIMITS), for a transport
# built here around the pool's preloaded TLS context.
LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=100, keepalive_expiry=30.0)


def build_client(settings: JevSettings) -> TypeSafeClient:
    """The SDK client, once per worker. No zstd: plain JSON works with any compatible server.
    A worker forked by the warm pool reuses the pool's parsed trust store (workers/tls.py)."""
    context = tls.context()
    transport = None if context is None else httpx2.HTTPTransport(verify=context, limits=LIMITS)
    return TypeSafeClient(
        api_key=settings.api_key,
        base_url=settings.base_url,
        model=settings.model,
        retry=RetryPolicy(max_retries=MAX_RETRIES, timeout=RETRY_BUDGET_S),
        timeout=TIMEOUT_S,
        compression=False,
        transport=transport,
    )


class RouterHandler:
    """`handler(request, send, cancel) -> reply` for the router worker."""

    def __init__(self, settings: JevSettings) -> None:
        self.settings = settings
        self.client: TypeSafeClient | None = None
        self.startup_error = ""
        try:
            self.client = build_client(settings)
        except TypeSafeError as exc:  # a missing or malformed key: every request says so
            missing = "TYPESAFE_API_KEY is not set"
            self.startup_error = missing if not settings.api_key else self._clean(str(exc))

    def __call__(self, request: Msg, send: Callable[[Msg], None], cancel: threading.Event) -> Msg:
        if not isinstance(request, Route):
            name = type(request).__name__
            return Failed(reply_to=getattr(request, "id", None), code="bad_request", detail=name)
        if self.client is None:
            return Failed(
                reply_to=request.id,
                code="provider",
                detail=self.startup_error,
                error_class="TypeSafeError",
            )
        return self.route(request, cancel)

    def route(self, request: Route, cancel: threading.Event) -> Msg:
        """Ask Jev; a provider error after the SDK's retries becomes Failed(provider)."""
        client = self.client
        assert client is not None
        question = Choice(instructions=request.instructions, criteria=dict(request.options))
        started = time.monotonic()
        try:
            response = call_cancellable(
                lambda: client.system_one(
                    state=request.state,
                    questions={request.question: question},
                    model=self.settings.model,
                ),
                cancel,
            )
        except Cancelled:
            return Failed(reply_to=request.id, code="cancelled", detail="cancelled during routing")
        except Exception as exc:  # any SDK or transport failure is the provider's, reported as such
            where = unreachable(exc, "TYPESAFE_BASE_URL", self.settings.base_url)
            detail = self._clean((str(exc) or repr(exc)) + where)
            return Failed(
                reply_to=request.id, code="provider", detail=detail, error_class=type(exc).__name__
            )
        return self._routed(request, response, time.monotonic() - started)

    def _routed(self, request: Route, response: Any, seconds: float) -> Msg:
        answer = response.choices.get(request.question)
        if answer is None:
            detail = f"Jev returned no choice answer for {request.question!r}"
            return Failed(reply_to=request.id, code="provider", detail=detail)
        mismatch = _label_mismatch(list(request.options), answer.choice, answer.probabilities)
        if mismatch:
            detail = "Jev answered with labels other than the offered ones: " + mismatch
            return Failed(reply_to=request.id, code="provider", detail=self._clean(detail))
        probabilities = {label: float(answer.probabilities[label]) for label in request.options}
        usage = ModelUsage(
            provider="typesafe",
            model=response.model or self.settings.model,
            seconds=round(seconds, 6),
            usage=response.usage.model_dump(exclude_none=True),
        )
        return Routed(
            reply_to=request.id,
            choice=answer.choice,
            confidence=float(answer.confidence),
            probabilities=probabilities,
            usage=usage,
        )

    def close(self) -> None:
        """Release the SDK client's connections (the worker process just exits instead)."""
        if self.client is not None:
            self.client.close()

    def _clean(self, text: str) -> str:
        return redact(text, self.settings.api_key)


def _label_mismatch(offered: list[str], choice: str, probabilities: Mapping[str, Any]) -> str:
    """'' when the labels are exactly the offered ones; else which are extra, missing, chosen."""
    extra = [label for label in probabilities if label not in offered]
    missing = [label for label in offered if label not in probabilities]
    parts = [f"unoffered label {', '.join(map(repr, extra[:3]))}"] if extra else []
    parts += [f"no probability for offered {', '.join(map(repr, missing[:3]))}"] if missing else []
    if choice not in offered:
        parts.append(f"chose the unoffered {choice!r}")
    return "; ".join(parts)


def main() -> None:
    """`python -m workers.router ENDPOINT`: serve until Shutdown or the kernel is gone."""
    from workers.base import main_for  # late: the handler is testable without the loop

    main_for("router", lambda _argv: RouterHandler(JevSettings.from_env()))


if __name__ == "__main__":
    main()
