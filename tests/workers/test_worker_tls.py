"""The warm pool's preloaded TLS trust store (workers/tls.py) is reused only where a fresh one
would be the same: the worker's own SSL_CERT_FILE / SSL_CERT_DIR decide, never the pool's."""

from __future__ import annotations

import ssl

import pytest

from workers import router, tls


def test_no_context_before_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "_cached", None)
    assert tls.context() is None


def test_the_preloaded_context_serves_only_the_same_trust_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tls, "_cached", None)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls.preload()
    context = tls.context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert tls.context() is context  # built once
    monkeypatch.setenv("SSL_CERT_FILE", "/elsewhere/ca.pem")  # the kernel's choice differs
    assert tls.context() is None
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", "/elsewhere")
    assert tls.context() is None


def test_the_router_client_uses_the_preloaded_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "_cached", None)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    settings = router.JevSettings(api_key="k-123", base_url="https://127.0.0.1:9")
    seen: list[object] = []
    real = router.httpx2.HTTPTransport

    def transport(**kwargs: object) -> object:
        seen.append(kwargs["verify"])
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(router.httpx2, "HTTPTransport", transport)
    router.build_client(settings)
    assert seen == []  # no pool: the SDK builds its own, as before
    tls.preload()
    router.build_client(settings)
    assert seen == [tls.context()]


def test_the_pool_parses_the_trust_store_the_kernels_name() -> None:
    """The pool's allowlisted environment keeps SSL_CERT_FILE / SSL_CERT_DIR: without them it
    built the default store, which no kernel on a machine that sets them could reuse, so every
    forked router parsed the CA bundle again. Keys still stay out."""
    from host import pool as H

    env = {"PATH": "/bin", "SSL_CERT_FILE": "/x/ca.pem", "SSL_CERT_DIR": "/x"}
    out = H.pool_env(env | {"TYPESAFE_API_KEY": "k" * 32, "FLASH_API_KEY": "f" * 32})
    assert out["SSL_CERT_FILE"] == "/x/ca.pem" and out["SSL_CERT_DIR"] == "/x"
    assert "TYPESAFE_API_KEY" not in out and "FLASH_API_KEY" not in out
