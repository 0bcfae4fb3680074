"""Redaction cost: `python -m bench redact` prints the tables `run()` returns.

Every byte leaving jmp goes through the redactor, so its cost per event matters.

1. A ~100 KB tool output with 50 known secrets (none present, the common case), as a ratio to
   the naive baseline (one `str.replace` per secret over the same text; the redactor also
   matches token formats, which the baseline does not, so the ratio is a reference, not a
   goal). Goal: under 0.25 s per 100 KB (formerly a wall-clock assert in tests/test_redact.py).
2. The encoded forms (issue 32 item 6): realistic tool outputs (a listing, a traceback, JSON, a
   base64 blob and hex digests) of 2 KB to 1 MB, the four keys known, timed with the raw values
   only (what 623aa1b redacted: its one alternation), with the encoded forms (this redactor),
   and with the forms in one alternation with the raw values (the design not taken). `none`:
   no key in the text; `encoded`: each key base64- and hex-encoded once in it; `wrapped-none`:
   the same output with a line-wrapped base64 blob (GNU `base64`, 76 columns) and an `xxd -p`
   dump (60 columns) of random bytes added, no key; `wrapped`: that one with the four keys'
   `.env` printed through `base64` and `xxd -p` as well. The ratios are to `raw`.
3. The pieces at the cuts (issue 32 item 6, a key cut before it was redacted): the four keys
   known, the redactor without its last pass (`whole`: the whole forms only) and with it
   (`text`), over a record's short strings (1,000 of 10 to 200 characters) and the tool outputs
   of table 2; `cut`: the text ends with 20 characters of a key and an ellipsis (a clip).
"""

from __future__ import annotations

import base64
import os
import re
import statistics
import textwrap
import time
from collections.abc import Callable
from functools import partial

from kernel.store.redact import Redactor
from protocol.redact import REDACTED, encoded_forms
from protocol.secrets import TOKEN_PATTERNS

SECRETS = [f"secret-number-{i:04d}" for i in range(50)]
TEXT = "ordinary tool output line with nothing secret in it\n" * 2000  # ~100 KB
RUNS = 15
KEYS = [
    f"{name}-{base64.urlsafe_b64encode(os.urandom(24)).decode()}"
    for name in ("jevkey", "flashkey", "sk-deep", "foxkey")
]
SIZES = (2_000, 30_000, 250_000, 1_000_000)


def _median_s(fn: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _interleaved(fns: list[Callable[[], object]], runs: int) -> list[float]:
    """The median time of each of `fns`, run in turn `runs` times (so that all see one load)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, taken in zip(fns, times, strict=True):
            started = time.perf_counter()
            fn()
            taken.append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


def _naive(text: str) -> str:
    for secret in SECRETS:
        text = text.replace(secret, "[redacted]")
    return text


def _alternation(literals: list[str]) -> re.Pattern[str]:
    known = sorted(literals, key=len, reverse=True)
    return re.compile("|".join([*(re.escape(s) for s in known), *TOKEN_PATTERNS]))


def tool_output(size: int, keyed: bool) -> str:
    """About `size` characters of what tools print; `keyed`: each key encoded in it once."""
    parts = [f"-rw-r--r-- 1 dev dev  4096 Dec  2 18:32 src/module_{i}.py\n" for i in range(20)]
    parts.append('Traceback (most recent call last):\n  File "app.py", line 12, in <module>\n')
    parts.append('{"id": 42, "name": "build", "status": "ok", "tags": ["a", "b"]}\n')
    parts.append(base64.b64encode(os.urandom(600)).decode() + "\n")
    parts.append(os.urandom(32).hex() + "  dist/app.tar.gz\n")
    block = "".join(parts)
    text = (block * (size // len(block) + 1))[:size]
    if keyed:
        middle = len(text) // 2
        inserts = [base64.b64encode(b"k=" + k.encode()).decode() for k in KEYS]
        inserts += [k.encode().hex() for k in KEYS]
        text = text[:middle] + " ".join(inserts) + "\n" + text[middle:]
    return text


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) + "\n"


def wrapped_output(size: int, keyed: bool) -> str:
    """`tool_output(size, False)` with a wrapped base64 blob and an `xxd -p` dump added in the
    middle (`keyed`: and the keys' `.env` printed by `base64` and by `xxd -p`)."""
    text = tool_output(size, False)
    blob = os.urandom(max(size // 20, 600))
    dumps = [_wrap(base64.b64encode(blob).decode(), 76), _wrap(blob.hex(), 60)]
    if keyed:
        env = "".join(f"KEY_{i}={key}\n" for i, key in enumerate(KEYS)).encode()
        dumps += [_wrap(base64.b64encode(env).decode(), 76), _wrap(env.hex(), 60)]
    middle = len(text) // 2
    return text[:middle] + "".join(dumps) + text[middle:]


def encodings_table() -> list[str]:
    redactor = Redactor(KEYS)
    raw = _alternation(KEYS)
    single = _alternation(sorted(redactor.forms))
    rows = [
        f"redact tool output, {len(KEYS)} keys known ({len(redactor.forms)} literals with"
        " their encoded forms), median of 9-51 interleaved runs",
        f"{'size':>9} {'keys':>12} {'raw ms':>8} {'forms ms':>9} {'ratio':>6}"
        f" {'1 alternation ms':>17} {'ratio':>6}",
    ]
    for size in SIZES:
        runs = max(9, min(51, 3_000_000 // size))
        for case in ("none", "encoded", "wrapped-none", "wrapped"):
            keyed = case in ("encoded", "wrapped")
            if case.startswith("wrapped"):
                text = wrapped_output(size, keyed)
            else:
                text = tool_output(size, keyed)
            out = redactor.text(text)
            assert (REDACTED in out) == keyed, case
            joined = out.replace("\r\n", "").replace("\n", "")  # (a wrapped form is whole)
            assert not keyed or not any(f in joined for f in encoded_forms(KEYS[0])), case
            before, after, one = _interleaved(
                [
                    partial(raw.sub, REDACTED, text),
                    partial(redactor.text, text),
                    partial(single.sub, REDACTED, text),
                ],
                runs,
            )
            rows.append(
                f"{len(text):>9,} {case:>12} {before * 1000:>8.2f}"
                f" {after * 1000:>9.2f} {after / before:>5.2f}x {one * 1000:>17.2f}"
                f" {one / before:>5.2f}x"
            )
    return rows


def short_strings(count: int = 1000) -> list[str]:
    """A record's fields: ids, names, one-line summaries, 10 to 200 characters."""
    words = ["run", "tool", "bash", "ok", "exit", "status", "file", "path", "src", "module"]
    return [
        " ".join(words[(i + j) % len(words)] for j in range(2 + i % 38))[:200] for i in range(count)
    ]


def _each(fn: Callable[[str], str], texts: list[str]) -> list[str]:
    return [fn(t) for t in texts]


def cuts_table() -> list[str]:
    redactor = Redactor(KEYS)
    rows = [
        "the pieces of keys at cuts: the whole forms only (`whole`) and with the last pass"
        " (`text`), 4 keys known, median of 9-51 interleaved runs",
        f"{'text':>22} {'case':>6} {'whole ms':>9} {'text ms':>8} {'ratio':>6}",
    ]
    strings = short_strings()
    cases: list[tuple[str, str, Callable[[], object], Callable[[], object]]] = []
    whole, text = redactor._whole, redactor.text  # (the last pass measured alone)
    cases.append(
        (
            "1,000 short strings",
            "none",
            partial(_each, whole, strings),
            partial(_each, text, strings),
        )
    )
    cut = [s + " " + KEYS[i % 4][:20] + "…" for i, s in enumerate(strings)]
    assert all(REDACTED in text(s) for s in cut)
    cases.append(
        (
            "1,000 short strings",
            "cut",
            partial(_each, whole, cut),
            partial(_each, text, cut),
        )
    )
    for size in SIZES:
        out = tool_output(size, False)
        cases.append((f"{len(out):,} output", "none", partial(whole, out), partial(text, out)))
        out = out + KEYS[0][:20] + "…"
        cases.append((f"{len(out):,} output", "cut", partial(whole, out), partial(text, out)))
    for name, case, before, after in cases:
        runs = 51 if "short" in name or "2," in name else 15
        first, second = _interleaved([before, after], runs)
        rows.append(
            f"{name:>22} {case:>6} {first * 1000:>9.3f} {second * 1000:>8.3f}"
            f" {second / first:>5.2f}x"
        )
    return rows


def run() -> str:
    """Time both over the same text; the redactor must leave it unchanged."""
    redactor = Redactor(SECRETS)
    assert redactor.text(TEXT) == TEXT
    ours = _median_s(lambda: redactor.text(TEXT))
    naive = _median_s(lambda: _naive(TEXT))
    return "\n".join(
        [
            f"redact {len(TEXT.encode()):,} bytes, {len(SECRETS)} known secrets, none present",
            f"{'redactor ms':>12} {'naive ms':>9} {'ratio':>6}",
            f"{ours * 1000:>12.2f} {naive * 1000:>9.2f} {ours / naive:>5.2f}x",
            "goal: redactor < 250 ms per 100 KB (the ratio is for reference)",
            "",
            *encodings_table(),
            "",
            *cuts_table(),
        ]
    )


if __name__ == "__main__":
    print(run())
