"""One TLS trust store per process, parsed once: the warm pool builds it before it forks, so a
forked router does not spend 0.1-0.5 s (a loaded machine) parsing the CA bundle at its start,
which every new HTTP client of the SDK otherwise does.

The context is the one the SDK's HTTP client builds by default (`httpx2.create_ssl_context()`),
and it is reused only while SSL_CERT_FILE and SSL_CERT_DIR (which choose the trust store) are
what they were when it was built: a worker runs with its kernel's environment, never the
pool's choice of CAs (the pool keeps both variables: host/pool.py `_POOL_ENV_KEYS`).
Building it starts no thread, so the pool stays fork-safe.
"""

from __future__ import annotations

import os
import ssl

_cached: tuple[tuple[str | None, str | None], ssl.SSLContext] | None = None


def _key() -> tuple[str | None, str | None]:
    return os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")


def preload() -> None:
    """Build the default client context now (the pool calls this before serving)."""
    global _cached
    import httpx2

    _cached = (_key(), httpx2.create_ssl_context())


def context() -> ssl.SSLContext | None:
    """The preloaded context when this environment would build the same one, else None (the
    SDK then builds its own, as without a pool)."""
    if _cached is not None and _cached[0] == _key():
        return _cached[1]
    return None
