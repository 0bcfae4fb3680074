"""An answer streamed to the editor as it is generated, never a partial key.

The generator's text arrives unredacted, in pieces (`Agent(on_answer=...)`). What is sent is
always `redact(raw[:cut])` for a *safe* cut, so every piece sent is a prefix of what the
recorded answer (`final`, redacted whole) will say:

- a cut is a word start (after whitespace, before a non-space): no token format the redactor
  knows (protocol/secrets.py TOKEN_PATTERNS) holds whitespace, so none can run across it, and
  the answer's final `strip()` can never remove text that was sent;
- it is at least N-1 characters before the end, N the longest literal the redactor replaces
  (a known secret or an encoded form of one: `Redactor.forms`), so one still arriving cannot
  have begun before it;
- no complete occurrence of one runs across it;
- it is not a line start inside a run of base64 or hex characters broken by line breaks (one
  wrapped encoded stream, which the redactor joins: `protocol/redact.py`), so a key's form
  wrapped across lines is redacted whole, never sent a line at a time.

Pieces are sent only when the text grew by a twentieth (at least 64 characters), so that the
re-redaction of the prefix stays linear in the answer's length overall.
"""

from __future__ import annotations

from typing import Protocol

from protocol.redact import WRAPPED_CHARS

MIN_STEP = 64


class Redacts(Protocol):
    @property
    def forms(self) -> frozenset[str]: ...

    def text(self, s: str) -> str: ...


def safe_cut(raw: str, secrets: frozenset[str], limit: int | None = None) -> int:
    """The largest safe cut of raw at or before `limit` (default: the end), 0 if none."""
    hold = max((len(s) for s in secrets), default=0)
    cut = min(len(raw) - max(hold - 1, 0), len(raw) if limit is None else limit)
    while True:
        cut = word_start(raw, cut)
        if cut <= 0:
            return 0
        across = [
            start
            for secret in secrets
            for start in occurrences(raw, secret, cut - len(secret) + 1, cut)
        ]
        if not across:
            return cut
        cut = min(across)


def word_start(raw: str, at: int) -> int:
    """The largest p <= at with raw[p - 1] whitespace and raw[p] not, else 0; not a line
    start between two characters of a wrapped encoding."""
    p = min(at, len(raw) - 1)
    while p > 0 and not (raw[p - 1].isspace() and not raw[p].isspace() and not _wrapped(raw, p)):
        p -= 1
    return p


def _wrapped(raw: str, p: int) -> bool:
    """Is raw[p] the first character of a line that goes on a base64 or hex run of the line
    before it (`\n` or `\r\n` between)?"""
    if raw[p - 1] != "\n" or raw[p] not in WRAPPED_CHARS:
        return False
    before = p - 3 if p >= 3 and raw[p - 2] == "\r" else p - 2
    return before >= 0 and raw[before] in WRAPPED_CHARS


def occurrences(raw: str, secret: str, start: int, before: int) -> list[int]:
    """Starts of secret in raw within [start, before) that run past `before`."""
    found, at = [], raw.find(secret, max(0, start))
    while 0 <= at < before:
        if at + len(secret) > before:
            found.append(at)
        at = raw.find(secret, at + 1)
    return found


class AnswerStream:
    """One answer's pieces: `feed` returns the redacted text to send now ("" for nothing);
    `sent` is all that was sent. A resent request (its text starting again at offset 0) makes
    it stop: the rest arrives with the recorded answer (Translator.finish)."""

    def __init__(self, redactor: Redacts) -> None:
        self.redactor = redactor
        self.raw = ""
        self.sent = ""
        self.stopped = False
        self._cut = 0  # raw[:_cut] is what `sent` redacts
        self._skipped = 0  # leading whitespace dropped before the first character

    def feed(self, offset: int, text: str) -> str:
        if self.stopped:
            return ""
        if offset != len(self.raw) + self._skipped:
            self.stopped = True  # the model started over: what was sent may not be its prefix
            return ""
        if not self.raw:
            stripped = text.lstrip()  # the recorded answer is stripped: so is what is sent
            self._skipped += len(text) - len(stripped)
            text = stripped
        self.raw += text
        if len(self.raw) - self._cut < max(MIN_STEP, self._cut // 20):
            return ""
        cut = safe_cut(self.raw, self.redactor.forms)
        if cut <= self._cut:
            return ""
        shown = self.redactor.text(self.raw[:cut])
        if not shown.startswith(self.sent):  # never: a safe cut keeps the prefix
            self.stopped = True
            return ""
        piece, self.sent, self._cut = shown[len(self.sent) :], shown, cut
        return piece
