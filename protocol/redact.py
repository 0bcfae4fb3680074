"""The one redactor of jmp: known secret values and the token formats, one rule set, one marker.

Everything that stores, prints or hands over text redacts it here: the kernel (its session's
log and artifacts, the front ends' printers, kernel/store/redact.py adds what the environment
holds), the workers (a provider's or an MCP server's error text) and jev_harness (a toolkit's
own key, a task's secrets). The rules (protocol/secrets.py): a known value counts from
MIN_SECRET_CHARS characters on (shorter ones would redact ordinary words and numbers), stripped;
its common encodings (base64, hex, percent: `encoded_forms`) count as the value; a value
that contains another is replaced whole; the token formats wherever they appear. A pure
function over str, so it lives in the shared leaf: stdlib only.

The encoded forms are many literals (about eight per secret) that almost never occur, and one
alternation of them with the raw values would make every call 3 to 37 times slower
(bench/redact.py): instead each form present (one `in` per form, at memory speed) is replaced
by `str.replace`, longest first, and then the raw values and the token formats by their one
pattern, as before.

Line-wrapped encodings (`base64` and `openssl base64`, `base64 -w N`, `xxd -p`, CRLF line ends)
and hex dumps (`xxd`, `hexdump -C`, `od -A x -t x1z`: an offset, hex bytes in groups, a text
column) hold the same forms with line breaks or spaces between their characters. A wrapped one
is found in the text without its line breaks (two `str.replace`, then one `in` per form), and
only where one is are its occurrences mapped back (`_unjoined`); a dump's lines are found from
their line breaks and joined (`_Pieces`): the hex groups for the hex forms, the text column for
the raw values. Each line's piece of an occurrence is replaced by the marker, so that every
line keeps its place and no line keeps a character of the run. `value` joins the consecutive
strings of a list as lines (a wrapped encoding kept as a list of its lines).

Text is cut before it reaches the redactor in places (a task script's outcome clipped to 1,200
characters, an evidence window, a preview, an output cap), and a key across the cut leaves a
piece that is no longer the key. The last pass (`_cut_spans`) replaces such a piece of any form,
MIN_FRAGMENT_CHARS or more, where a cutter leaves one: at the text's ends, at an ellipsis and
around a line starting with `[` (`_cut_points`), one set lookup per place in a table of every
form's 8-character windows.
"""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

from protocol.secrets import MIN_SECRET_CHARS, REDACTED, TOKEN_PATTERNS

__all__ = [
    "MIN_ENCODED_SECRET_CHARS",
    "MIN_FRAGMENT_CHARS",
    "REDACTED",
    "WRAPPED_CHARS",
    "Redactor",
    "encoded_forms",
    "redact",
    "refuse_short",
]

_TOKENS = "|".join(TOKEN_PATTERNS)

MIN_ENCODED_SECRET_CHARS = 12
# The shortest piece of a known form redacted where a text was cut through it (`_cut_spans`):
# a shorter one shows at most 7 characters of a key (of the vendors' 20 to 100), 28 bits of
# its hex, 42 of its base64
MIN_FRAGMENT_CHARS = 8
# Where a text may have been cut (what the cutters write: jev_harness/text.py `clip`'s ellipsis,
# kernel/run/ledger.py's `[... N more characters]` line, kernel/context/render.py's
# `[… N bytes omitted …]` line, the bash caps' `[stopped at ...]` line): an ellipsis, `...`,
# a line starting with `[`, and the text's own two ends
_ELLIPSES = ("…", "...")

_PERCENT_HEX = re.compile(r"%[0-9A-F]{2}")
# For a secret starting at byte `a` of a 3-byte group: the leading characters that hold bits of
# the bytes before it (8a bits: ceil(8a / 6) characters) ...
_SKIP = {0: 0, 1: 2, 2: 3}
# ... and, for a secret ending `r` bytes into a group, the trailing characters that hold bits of
# the bytes after it (r = 1: the 2nd of 2 characters; r = 2: the 3rd of 3).
_TAIL = {0: 0, 1: 1, 2: 1}


def base64_runs(raw: bytes) -> list[str]:
    """The stable inner run of raw's standard base64 in each of the three alignments."""
    runs = []
    for a in range(3):
        text = base64.b64encode(b"\0" * a + raw).decode("ascii").rstrip("=")
        tail = _TAIL[(a + len(raw)) % 3]
        runs.append(text[_SKIP[a] : len(text) - tail])
    return runs


def _percent_lower(text: str) -> str:
    return _PERCENT_HEX.sub(lambda m: m.group(0).lower(), text)


def encoded_forms(secret: str) -> frozenset[str]:
    """Every encoded form of `secret` the redactor replaces; never the secret itself.

    A shell or a task script can print a key it read from a file (`.env`) base64-, hex- or
    percent-encoded, past a redactor that knows only the raw value. The forms are those whose
    text depends on the secret alone:

    - base64, standard and URL-safe alphabets, padded or not: the secret may start at byte 0, 1
      or 2 of a 3-byte group of the encoded stream (what precedes it is unknown), so for each
      alignment the form is the *stable inner run*, the characters all 6 bits of which are the
      secret's (`base64_runs`). What surrounds the run (at most 3 characters either side, partly
      the neighbours' bits) stays; padding is outside every run, so `=` or none is one form;
    - hex of the UTF-8 bytes, lower and upper case;
    - percent-encoding of every byte (`%6B%65...`), and of only the reserved characters as
      `urllib.parse.quote` does (`safe="/"`, `safe=""`, `quote_plus`), hex digits in either
      case, where that differs from the raw value.

    None for a secret under MIN_ENCODED_SECRET_CHARS characters: the shortest form is then a
    15-character base64 run (90 bits of the secret), where a 6-character secret's would be 7
    characters of the alphabet identifiers and base64 payloads are made of. Keys are long (the
    vendors' 32 characters and more)."""
    if len(secret) < MIN_ENCODED_SECRET_CHARS:
        return frozenset()
    raw = secret.encode("utf-8")
    found: set[str] = set()
    for run in base64_runs(raw):
        found |= {run, run.translate(str.maketrans("+/", "-_"))}
    found |= {raw.hex(), raw.hex().upper()}
    every = "".join(f"%{b:02X}" for b in raw)
    for text in (every, quote(secret, safe="/"), quote(secret, safe=""), quote_plus(secret)):
        found |= {text, _percent_lower(text)}
    found.discard(secret)
    return frozenset(found)


# The characters of base64 (both alphabets) and hex: a wrapped stream of them is joined
WRAPPED_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
# A line's text between line breaks: the pieces of a wrapped form, each replaced
_LINE = re.compile(r"[^\r\n]+")

# A hex dump's line: an offset (6-16 hex digits, then `:` or one or two spaces) and one or more
# groups of hex bytes, or two or more groups, one or two spaces apart (`xxd`: groups of 2 bytes;
# `xxd -g1`, `hexdump -C`, `od -A x -t x1`: single bytes); only line starts are tried. Then
# the text column, where the bytes are shown as characters: a raw secret in it is cut by the
# line ends.
_GROUP = r"(?:[0-9a-fA-F]{2})+(?![0-9A-Za-z])"
_OFFSET = r"(?P<offset>[0-9a-fA-F]{6,16}(?:: ?| {1,2}))"
_DUMP_LINE = re.compile(  # after a line break: re finds the literal `\n` at memory speed
    rf"\n[ \t]*(?:{_OFFSET}{_GROUP}|{_GROUP} {{1,2}}{_GROUP})(?: {{1,2}}{_GROUP})*"
)
# The text column after the groups: `xxd`'s, `hexdump -C`'s `|...|`, `od -t x1z`'s `>...<`
_TEXT_COLUMN = re.compile(r" +[|>]?(.*?)[|<]?\r?$", re.M)
_HEX_GROUP = re.compile(r"[0-9a-fA-F]+")


class _Pieces:
    """Spans of a text whose characters, joined, are one encoded stream."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []
        self.starts: list[int] = []  # where each span starts in the joined text
        self.joined: list[str] = []
        self.size = 0

    def add(self, text: str, start: int, end: int) -> None:
        self.spans.append((start, end))
        self.starts.append(self.size)
        self.joined.append(text[start:end])
        self.size += end - start

    def covered(self, forms: Iterable[str]) -> list[tuple[int, int]]:
        """The parts of the spans that an occurrence of one of `forms` in the joined text
        covers."""
        joined = "".join(self.joined)
        found: list[tuple[int, int]] = []
        for form in forms:
            at = joined.find(form)
            while at >= 0:
                end = at + len(form)
                first = bisect_right(self.starts, at) - 1
                for i in range(first, len(self.spans)):
                    if self.starts[i] >= end:
                        break
                    start, stop = self.spans[i]
                    offset = self.starts[i]
                    found.append((start + max(at - offset, 0), min(start + end - offset, stop)))
                at = joined.find(form, at + 1)
        return found


def _unbroken(s: str) -> str:
    """s without its line breaks (CRLF, LF)."""
    return s.replace("\r\n", "").replace("\n", "") if "\n" in s else s


def _unjoined(s: str, at: int, p: int = 0, q: int = 0) -> int:
    """The index in s of character `at` of s without its line breaks (CRLF, LF), counted on
    from a character known to be the q-th of it (p <= at's; s[p] not a break)."""
    base = p
    while True:  # p - (the break characters from base to p) grows to `at` - q, from below
        removed = s.count("\n", base, p) + s.count("\r\n", base, p)
        if p - base - removed == at - q and s[p] not in "\r\n":
            return p
        p = max(base + at - q + removed, p + (s[p] in "\r\n"))


def _replace_spans(s: str, spans: list[tuple[int, int]]) -> str:
    """s with each span replaced by the marker, spans that overlap or are only spaces apart
    (the groups of one dump line) replaced by one."""
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and (start <= merged[-1][1] or not s[merged[-1][1] : start].strip(" \t")):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out += [s[at:start], REDACTED]
        at = end
    out.append(s[at:])
    return "".join(out)


def _cut_points(s: str) -> tuple[list[int], list[int]]:
    """Where s may have been cut: the ends a piece of a form may stop at (the text's end, an
    ellipsis, the line break before a line starting with `[`; spaces before them skipped) and
    the starts one may begin at (the text's start, after an ellipsis or `[...]`, the line after
    a line starting with `[`). One C scan per kind of mark."""
    ends, starts = [len(s)], [0]
    for mark in _ELLIPSES:
        at = s.find(mark)
        while at >= 0:
            ends.append(at)
            after = at + len(mark)
            starts.append(after + 1 if s.startswith("]", after) else after)
            at = s.find(mark, after)
    if s.startswith("[") and "\n" in s:  # a text that starts with a mark line
        starts.append(s.find("\n") + 1)
    at = s.find("\n[")
    while at >= 0:
        ends.append(at)
        line_end = s.find("\n", at + 1)
        if line_end >= 0:
            starts.append(line_end + 1)
        at = s.find("\n[", at + 1)
    for i, end in enumerate(ends):  # what a cutter puts between the piece and its mark
        while end > 0 and s[end - 1] in " \t\r\n":
            end -= 1
        ends[i] = end
    for i, start in enumerate(starts):
        while start < len(s) and s[start] in " \t\r\n":
            start += 1
        starts[i] = start
    return ends, starts


def _alternation(literals: Iterable[str]) -> re.Pattern[str]:
    """The literals, longest first (a secret that contains another is replaced whole), then the
    token formats."""
    known = sorted(literals, key=len, reverse=True)
    return re.compile("|".join([*(re.escape(s) for s in known), _TOKENS]))


class Redactor:
    """Replaces known secret values (>= MIN_SECRET_CHARS), their encoded forms and the token
    formats with [REDACTED]."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._encoded: tuple[str, ...] = ()  # the secrets' encoded forms, longest first
        self._shortest = 0  # the length of the shortest form
        self._wrappable: frozenset[str] = frozenset()  # the base64 and hex forms (no `%`)
        self._hex: tuple[str, ...] = ()
        self._shortest_hex = 0
        self._pattern = re.compile(_TOKENS)
        # Each MIN_FRAGMENT_CHARS characters of each form (raw too): the window a piece of the
        # form's first k characters ends with (k, form), and the one a piece of its last
        # characters, from j on, starts with (j, form); longest piece first
        self._ending: dict[str, list[tuple[int, str]]] = {}
        self._starting: dict[str, list[tuple[int, str]]] = {}
        self.add(*secrets)

    def add(self, *values: str | None) -> None:
        """Register more secret values; ignores empty and short ones."""
        fresh = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_CHARS}
        fresh -= self._secrets
        if not fresh:
            return
        self._secrets |= fresh
        forms = set().union(*(encoded_forms(s) for s in self._secrets)) - self._secrets
        self._encoded = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        self._shortest = min(map(len, forms), default=0)
        self._wrappable = frozenset(f for f in self._encoded if "%" not in f)
        self._hex = tuple(f for f in self._wrappable if _HEX_GROUP.fullmatch(f))
        self._shortest_hex = min(map(len, self._hex), default=0)
        self._pattern = _alternation(self._secrets)
        ending: dict[str, list[tuple[int, str]]] = {}
        starting: dict[str, list[tuple[int, str]]] = {}
        size = MIN_FRAGMENT_CHARS
        # Pieces of a secret under MIN_ENCODED_SECRET_CHARS are not looked for, as its encoded
        # forms are not: they would be common words (`complete` of a secret `completed` is a
        # label of Jev's questions), and the piece would be most of a weak secret anyway.
        long_secrets = (s for s in self._secrets if len(s) >= MIN_ENCODED_SECRET_CHARS)
        for form in (*long_secrets, *self._encoded):
            for k in range(size, len(form)):  # (the whole form is not a piece: replaced before)
                ending.setdefault(form[k - size : k], []).append((k, form))
                starting.setdefault(form[len(form) - k : len(form) - k + size], []).append(
                    (len(form) - k, form)
                )
        self._ending = {w: sorted(v, reverse=True) for w, v in ending.items()}
        self._starting = {w: sorted(v) for w, v in starting.items()}

    @property
    def secrets(self) -> frozenset[str]:
        """The raw values (what a copy of this redactor is made from)."""
        return frozenset(self._secrets)

    @property
    def forms(self) -> frozenset[str]:
        """Every literal replaced: the raw values and their encoded forms (what a stream must
        hold back while one may still be arriving: acp_server/stream.py)."""
        return frozenset(self._secrets).union(self._encoded)

    def text(self, s: str) -> str:
        """The string with every secret, encoded form of one, and token replaced, and what is
        left of one where the text was cut through it (`_cut_spans`)."""
        return self._cut(self._whole(s))

    def _cut(self, s: str) -> str:
        """s with the pieces of forms at its cuts replaced (after the whole forms are)."""
        if len(s) < MIN_FRAGMENT_CHARS or not self._ending:
            return s
        if "…" not in s and "..." not in s and "\n[" not in s and s[0] != "[":  # (most texts)
            # only the two ends: one set lookup each
            end = s[-MIN_FRAGMENT_CHARS:].rstrip() if s[-1].isspace() else s
            start = s[:MIN_FRAGMENT_CHARS].lstrip() if s[0].isspace() else s
            if (
                end[-MIN_FRAGMENT_CHARS:] not in self._ending
                and start[:MIN_FRAGMENT_CHARS] not in self._starting
                and len(end) == len(s) == len(start)
            ):
                return s
        spans = self._cut_spans(s)
        return _replace_spans(s, spans) if spans else s

    def _whole(self, s: str) -> str:
        """s with every secret, encoded form of one, and token replaced."""
        if len(s) >= self._shortest:  # most strings of a record are shorter than any form
            # A form broken by line breaks is whole once they are gone (any width, any offset),
            # as is one that is not: one `in` per form over that text, at memory speed
            whole = _unbroken(s)
            broken = []  # the forms that are there with a line break in them
            for form in (form for form in self._encoded if form in whole):
                here = s.count(form)
                if whole.count(form) > here:
                    broken.append(form)
                if here:
                    s = s.replace(form, REDACTED)
            s = self._broken(s, broken)
        return self._pattern.sub(REDACTED, s)

    def _cut_spans(self, s: str) -> list[tuple[int, int]]:
        """The pieces of known forms (raw or encoded) left where the text was cut through one
        before it was redacted: a form's first MIN_FRAGMENT_CHARS or more characters ending at
        a cut (`_cut_points`), its last ones starting at one. What cuts before it redacts
        leaves such a piece: a clip to N characters, a window, an output cap, a head and tail
        excerpt. Per cut point, one set lookup of the 8 characters there; on a hit (a key is
        there) the pieces that end or start with them are compared."""
        size = MIN_FRAGMENT_CHARS
        spans: list[tuple[int, int]] = []
        ends, starts = _cut_points(s)
        for end in ends:
            for k, form in self._ending.get(s[max(end - size, 0) : end], ()):
                if end >= k and s.startswith(form[:k], end - k):
                    spans.append((end - k, end))
                    break
        for start in starts:
            for j, form in self._starting.get(s[start : start + size], ()):
                if s.startswith(form[j:], start):
                    spans.append((start, start + len(form) - j))
                    break
        return spans

    def _broken(self, s: str, broken: list[str]) -> str:
        """s with the base64 and hex forms (of `broken`) replaced where line breaks (a wrapped
        stream) run through them, and the hex forms where a hex dump's layout does."""
        spans = self._broken_spans(s, broken)
        return _replace_spans(s, spans) if spans else s

    def _broken_spans(self, s: str, found: Iterable[str]) -> list[tuple[int, int]]:
        """Where `_broken` puts the marker: spans within one line each."""
        spans: list[tuple[int, int]] = []
        wrappable = [form for form in found if form in self._wrappable]
        joined = _unbroken(s) if wrappable else ""
        broken = [form for form in wrappable if form in joined]
        for form in broken:  # (rare: a key is there) each line's piece of each occurrence
            start, known, at = 0, 0, joined.find(form)
            while at >= 0:
                start = _unjoined(s, at, start, known)
                end = _unjoined(s, at + len(form) - 1, start, at) + 1
                spans += [p.span() for p in _LINE.finditer(s, start, end)]
                known, at = at, joined.find(form, at + 1)
        if self._hex:
            spans += self._dumped(s)
        return spans

    def _lines(self, items: list[Any]) -> list[Any]:
        """items (each redacted) with the forms that run across consecutive strings, as across
        lines, replaced: a wrapped encoding kept as a list of its lines."""
        at = 0
        while at < len(items):
            end = at
            while end < len(items) and isinstance(items[end], str):
                end += 1
            if end - at > 1 and sum(map(len, items[at:end])) >= self._shortest:
                starts, size = [], 0
                for item in items[at:end]:
                    starts.append(size)
                    size += len(item) + 1
                spans = self._broken_spans("\n".join(items[at:end]), self._wrappable)
                for i in range(at, end):
                    start, stop = starts[i - at], starts[i - at] + len(items[i])
                    mine = [(a - start, b - start) for a, b in spans if start <= a and b <= stop]
                    if mine:
                        items[i] = _replace_spans(items[i], mine)
            at = end + 1
        return items

    def _dumped(self, s: str) -> list[tuple[int, int]]:
        """The spans of hex forms in the hex columns of a dump's consecutive lines, and of the
        raw secrets in their text columns."""
        spans: list[tuple[int, int]] = []
        hexed, shown, after = _Pieces(), _Pieces(), -1  # after: where the last line ended
        s = "\n" + s  # (so that the first line follows a line break too; spans shift by 1)
        for line in _DUMP_LINE.finditer(s):
            if hexed.size and s[after : line.start() + 1].strip("\r\n"):
                spans += self._dump_block(hexed, shown)
                hexed, shown = _Pieces(), _Pieces()
            start = line.start() + 1 if line["offset"] is None else line.end("offset")
            first, last = 0, start
            for group in _HEX_GROUP.finditer(s, start, line.end()):
                size = group.end() - group.start()
                if first and group.start() - last > 1 and size != first:
                    break  # after two spaces, a word of the text column
                first, last = first or size, group.end()
                hexed.add(s, group.start(), group.end())
            after = s.find("\n", line.end())
            after = len(s) if after < 0 else after
            text = _TEXT_COLUMN.match(s, last, after)
            if text is not None:
                shown.add(s, text.start(1), text.end(1))
        spans += self._dump_block(hexed, shown)
        return [(start - 1, end - 1) for start, end in spans]

    def _dump_block(self, hexed: _Pieces, shown: _Pieces) -> list[tuple[int, int]]:
        if hexed.size < self._shortest_hex:
            return []
        return hexed.covered(self._hex) + shown.covered(self._secrets)

    def value(self, obj: Any) -> Any:
        """A deep copy of dicts/lists/tuples with every string (keys too) redacted."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            # the pieces at the cuts last: a list's strings may be the lines of one stream
            items = [self._whole(v) if isinstance(v, str) else self.value(v) for v in obj]
            items = [self._cut(v) if isinstance(v, str) else v for v in self._lines(items)]
            return items if isinstance(obj, list) else tuple(items)
        return obj


def refuse_short(secrets: Iterable[str]) -> None:
    """ValueError when a non-empty one of `secrets` is too short for the rule, which would pass
    it unredacted: for secrets given by name (a task's), where a refusal beats a silent leak."""
    short = sum(bool(s) and len(s.strip()) < MIN_SECRET_CHARS for s in secrets)
    if short:
        raise ValueError(
            f"{short} of the secrets given is shorter than {MIN_SECRET_CHARS} characters: "
            "too short to redact without redacting ordinary words"
        )


def redact(text: str, *secrets: str | Iterable[str]) -> str:
    """`text` through a Redactor of `secrets` (strings or iterables of strings): for a text
    redacted once (an error message), where no redactor is kept."""
    known: list[str] = []
    for item in secrets:
        known.extend([item] if isinstance(item, str) else item)
    return Redactor(known).text(text)
