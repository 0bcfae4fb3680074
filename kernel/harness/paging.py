"""Request sizing and paging of large domains (docs/HARNESS.md section 3).

A question allows at most MAX_OPTIONS labels, and a whole request (state, instructions and
every label and description, in UTF-8) at most REQUEST_BUDGET bytes. A domain that does not fit
is split, in its own order, into pages that each fit; Jev first picks a page (question
`<tool>.<parameter>.page`, labels `page1`, `page2`, ...), then the option inside it. Nothing is
ever silently cut: what cannot be asked at all raises RequestTooLarge.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel.errors import JmpError
from protocol.harness import OptionSpec

MAX_OPTIONS = 255
REQUEST_BUDGET = 24_000
PAGE_DESCRIPTION_CHARS = 200
_ENDS_CHARS = 80  # of each end option's description inside a page description


class RequestTooLarge(JmpError):
    """A decision cannot be put to Jev within the request budget, even paged."""


def size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def options_size(options: Sequence[OptionSpec]) -> int:
    """UTF-8 bytes of every label and description."""
    return sum(size(o.id) + size(o.description) for o in options)


def request_size(state: str, instructions: str, options: Sequence[OptionSpec]) -> int:
    """What the budget counts for one question."""
    return size(state) + size(instructions) + options_size(options)


def pages(
    options: Sequence[OptionSpec], fixed: int, budget: int = REQUEST_BUDGET
) -> list[list[OptionSpec]]:
    """The domain as one page when it fits, else consecutive pages that each fit.

    `fixed` is the size of the state and instructions that go with every question.
    """
    if len(options) <= MAX_OPTIONS and fixed + options_size(options) <= budget:
        return [list(options)]
    room = budget - fixed
    result: list[list[OptionSpec]] = []
    page: list[OptionSpec] = []
    used = 0
    for option in options:
        cost = size(option.id) + size(option.description)
        if cost > room:
            raise RequestTooLarge(
                f"option {option.id!r} alone ({cost} bytes) does not fit the request budget "
                f"of {budget} bytes beside the state"
            )
        if page and (len(page) == MAX_OPTIONS or used + cost > room):
            result.append(page)
            page, used = [], 0
        page.append(option)
        used += cost
    if page:
        result.append(page)
    return result


def page_options(chunks: Sequence[Sequence[OptionSpec]]) -> list[OptionSpec]:
    """The page question's options: `pageN`, described by its first and last option."""
    if len(chunks) > MAX_OPTIONS:
        raise RequestTooLarge(f"a domain of {len(chunks)} pages cannot be asked in one question")
    out = []
    for number, chunk in enumerate(chunks, 1):
        first, last = chunk[0], chunk[-1]
        text = (
            f"{len(chunk)} options, from {first.id} ({_clip(first.description)}) "
            f"to {last.id} ({_clip(last.description)})"
        )
        out.append(OptionSpec(id=f"page{number}", description=text[:PAGE_DESCRIPTION_CHARS]))
    return out


def _clip(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= _ENDS_CHARS else one[: _ENDS_CHARS - 1] + "…"
