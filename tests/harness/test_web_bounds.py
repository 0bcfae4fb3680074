"""HttpProvider's bounds that the loopback site cannot show (issue 20, item 13): the deadline
covers the response headers, not only the body, and an IPv6 form that carries an inward IPv4
address (6to4, Teredo, NAT64, mapped, compatible, translated) is inward."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from jev_harness.web import HttpProvider, WebError
from jev_harness.web.urls import is_inward

DRIBBLE_S = 20.0  # how long the server keeps dribbling; far past the provider's deadline


@pytest.fixture
def dribbler() -> Iterator[str]:
    """A server that answers one header byte every 50 ms for DRIBBLE_S, then hangs up: every
    socket wait is short, only the whole fetch is long."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
            conn.sendall(head)
            ends = time.monotonic() + DRIBBLE_S
            while not stop.is_set() and time.monotonic() < ends:
                try:
                    conn.sendall(b"X")  # one endless header line
                except OSError:
                    return  # the client gave up: what the test wants
                stop.wait(0.05)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(DRIBBLE_S + 5)


def test_the_deadline_covers_dribbled_response_headers(dribbler: str) -> None:
    provider = HttpProvider(dribbler + "/", [dribbler], timeout_s=5.0, deadline_s=1.0)
    with pytest.raises(WebError) as info:
        provider.fetch(dribbler + "/")
    assert info.value.code == "timeout", info.value.message
    assert "1 s" in info.value.message


@pytest.mark.parametrize(
    "address",
    [
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254 (cloud metadata)
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:0:7f00:1",  # IPv4-translated (SIIT)
        "::127.0.0.1",  # IPv4-compatible (deprecated)
    ],
)
def test_ipv6_forms_of_inward_addresses_are_inward(address: str) -> None:
    assert is_inward(address)


@pytest.mark.parametrize("address", ["2002:808:808::1", "64:ff9b::808:808", "::ffff:8.8.8.8"])
def test_ipv6_forms_of_public_addresses_stay_public(address: str) -> None:
    assert not is_inward(address)


def test_a_name_resolving_to_a_6to4_loopback_is_refused_before_any_request() -> None:
    provider = HttpProvider(
        "http://public.test/", ["http://public.test"], resolver=lambda host, port: ["2002:7f00:1::"]
    )
    with pytest.raises(WebError) as info:
        provider.fetch("http://public.test/")
    assert info.value.code == "address_refused" and "2002:7f00:1::" in info.value.message
