"""What a reader could decode from a text: the oracle for redacted encodings of a key.

A test that looked for the redactor's own list of forms (`protocol.redact.encoded_forms`) could
never find a form the redactor lacks. This oracle knows nothing of it: it keeps a text's base64
characters (each alphabet in turn) or its hex digits, drops everything else (line breaks,
spaces, JSON's `\\n` escapes, the words around), decodes the rest in every alignment and looks
for the key's bytes in what comes out. A wrapped block, a block amid other text, a block in a
JSON string: one of the alignments is the block's own.
"""

from __future__ import annotations

import base64
import binascii
import re

__all__ = ["WINDOW", "decodings", "leaked", "windows"]

WINDOW = 6  # a run of this many of the key's bytes in a decoding counts as a leak
_ESCAPES = re.compile(r"\\[nrt]")  # JSON's escapes of line breaks (a log line, a request body)
_NOT_STANDARD = re.compile(r"[^A-Za-z0-9+/]")
_NOT_URL_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_NOT_HEX = re.compile(r"[^0-9a-fA-F]")


def decodings(text: str) -> dict[str, bytes]:
    """Every decoding of text's base64 characters (standard and URL-safe, each of the 4
    character alignments) and hex digits (each of the 2), by name."""
    text = _ESCAPES.sub(" ", text)
    found: dict[str, bytes] = {}
    for alphabet, strip in (("base64", _NOT_STANDARD), ("base64url", _NOT_URL_SAFE)):
        kept = strip.sub("", text).translate(str.maketrans("-_", "+/"))
        for skip in range(4):
            chunk = kept[skip:]
            chunk = chunk[: len(chunk) // 4 * 4]
            try:
                found[f"{alphabet}@{skip}"] = base64.b64decode(chunk, validate=True)
            except binascii.Error:  # (an `=` never survives the strip: cannot happen)
                found[f"{alphabet}@{skip}"] = b""
    digits = _NOT_HEX.sub("", text)
    for skip in range(2):
        chunk = digits[skip:]
        found[f"hex@{skip}"] = bytes.fromhex(chunk[: len(chunk) // 2 * 2])
    return found


def windows(secret: bytes, size: int = WINDOW) -> list[bytes]:
    return [secret[i : i + size] for i in range(max(len(secret) - size + 1, 1))]


def leaked(text: str, secret: str | bytes, size: int = WINDOW) -> list[str]:
    """Which decodings of text hold `size` consecutive bytes of the secret, and which bytes
    (empty: nothing of it can be decoded)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    pieces = windows(raw, size)
    return [
        f"{name}: {piece!r}"
        for name, decoded in decodings(text).items()
        for piece in pieces
        if piece in decoded
    ]
