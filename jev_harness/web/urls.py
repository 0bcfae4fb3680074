"""Origins and addresses: which URLs a web provider may ask for (no I/O here but DNS lookups).

An origin is `scheme://host:port` with the scheme and host lower-cased and the port explicit.
Only http and https are origins; a URL with user info never is. A host name that resolves to a
loopback, private, link-local (or otherwise non-public) address is refused unless the allowed
origin itself names such an address or `localhost` (see docs/DECISIONS.md, "DNS rebinding");
so is an IPv6 address that carries such an IPv4 address (6to4, Teredo, NAT64, IPv4-mapped,
-compatible or -translated forms).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urldefrag, urlsplit, urlunsplit

from jev_harness.web.page import WebError

DEFAULT_PORTS = {"http": 80, "https": 443}
Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (TCP), as strings; a failed lookup is a WebError."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebError("network", f"cannot resolve host {host!r}: {exc}") from None
    return sorted({str(info[4][0]) for info in infos})


def split_origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL without user info; anything else is a WebError."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise WebError("url_refused", f"not a valid URL: {url!r} ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise WebError("scheme_refused", f"only http and https are allowed, not {scheme!r}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise WebError("userinfo_refused", "URLs with user info (user:password@) are refused")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise WebError("url_refused", f"URL has no host: {url!r}")
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def origin_of(url: str) -> str:
    """`scheme://host:port` of an http(s) URL (IPv6 hosts bracketed)."""
    scheme, host, port = split_origin(url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def normalize_origins(origins: str | Iterable[str]) -> tuple[str, ...]:
    """Allowed origins from a list (or a comma/space separated string); each must be bare."""
    items = origins.replace(",", " ").split() if isinstance(origins, str) else list(origins)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"an allowed origin must be a string, not {type(item).__name__}")
        rest = urlsplit(item.strip())
        if rest.path not in ("", "/") or rest.query or rest.fragment:
            raise ValueError(f"an allowed origin is scheme://host[:port] only, not {item!r}")
        try:
            origin = origin_of(item)
        except WebError as exc:
            raise ValueError(f"bad allowed origin {item!r}: {exc}") from None
        if origin not in out:
            out.append(origin)
    return tuple(out)


def entry_and_origins(
    url: str, allowed_origins: str | Iterable[str] | None
) -> tuple[str, tuple[str, ...]]:
    """A provider's entry URL (canonical) and its allowed origins (default: the entry's own);
    ValueError naming the problem when the entry is unusable or on no allowed origin."""
    entry = canonical_url(url)
    try:
        entry_origin = origin_of(entry)
    except WebError as exc:
        raise ValueError(f"bad entry url {url!r}: {exc.message}") from None
    origins = normalize_origins(allowed_origins or [entry_origin])
    if entry_origin not in origins:
        raise ValueError(f"entry url {entry} is not on an allowed origin ({', '.join(origins)})")
    return entry, origins


def canonical_url(url: str) -> str:
    """One spelling per page: no #fragment (never sent), scheme and host lower-case, no default
    port, `/` for an empty path. Anything unparsable is returned without its fragment only."""
    url = urldefrag(url.strip())[0]
    try:
        parts = urlsplit(url)
        scheme, port = parts.scheme.lower(), parts.port
    except ValueError:
        return url
    if scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return url
    host = parts.hostname.lower().rstrip(".")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


# IPv6 forms that carry an IPv4 address a gateway or tunnel delivers to: NAT64's well-known
# prefix (RFC 6052), IPv4-compatible (deprecated) and IPv4-translated (SIIT) addresses. The
# ipaddress module names the others itself: ipv4_mapped, sixtofour (2002::/16), teredo.
_LAST_32_BITS = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96"))
_NAT64 = _LAST_32_BITS[0]


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo, NAT64, ...)."""
    found = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if ip.teredo is not None:
        found.extend(ip.teredo)  # the Teredo server and the (de-obfuscated) client
    if any(ip in net for net in _LAST_32_BITS):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def is_inward(address: str) -> bool:
    """True for loopback, private, link-local, unspecified, reserved, multicast and every other
    non-global address, and for an IPv6 address that carries such an IPv4 address (a 6to4,
    Teredo, NAT64, mapped or compatible form of 127.0.0.1 reaches 127.0.0.1)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if any(_inward(v4) for v4 in embedded):
            return True
        if embedded and (ip.ipv4_mapped is not None or ip in _NAT64):
            return False  # these deliver to the IPv4 they carry, which is public
    return _inward(ip)


def _inward(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return bool(
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_unspecified
        or ip.is_reserved
        or ip.is_multicast
        or not ip.is_global
    )


def names_inward(host: str) -> bool:
    """Whether an allowed origin's host itself names an inward address or localhost."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return is_inward(host)
    except ValueError:
        return False  # a name: its addresses are checked at each request


class OriginPolicy:
    """The allowed origins of one provider, checked per URL and per hop."""

    def __init__(self, origins: Iterable[str], resolver: Resolver = resolve) -> None:
        self.origins = tuple(origins)
        self._resolver = resolver

    def allows(self, url: str) -> bool:
        """A cheap check (no DNS): http(s), no user info, origin allowed."""
        try:
            return origin_of(url) in self.origins
        except WebError:
            return False

    def check(self, url: str) -> str:
        """The URL's origin if allowed (no DNS); else a WebError naming the refused origin."""
        origin = origin_of(url)
        if origin not in self.origins:
            raise WebError("origin_refused", f"origin {origin} is not in allowed_origins")
        return origin

    def addresses(self, url: str) -> list[str]:
        """Addresses to connect to for `url`: all of them checked, inward ones refused."""
        self.check(url)
        _, host, port = split_origin(url)
        addresses = self._resolver(host, port)
        if not addresses:
            raise WebError("network", f"host {host!r} resolved to no address")
        if names_inward(host):
            return addresses
        inward = [a for a in addresses if is_inward(a)]
        if inward:
            raise WebError(
                "address_refused",
                f"host {host!r} resolves to a non-public address ({inward[0]}); list that "
                "address or localhost as an allowed origin to reach it",
            )
        return addresses
