"""A prompt's content blocks as the request text jmp records (text in, nothing else guessed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from kernel.store.context_blocks import context_block
from protocol.text import clean

ACCEPTED = "text, resource links and embedded text resources"


def prompt_text(blocks: Sequence[Any]) -> str:
    """Text blocks verbatim, links as [name](uri), embedded text as a fenced context block.

    Images, audio and binary resources are refused (the capabilities say so), as is an empty
    prompt, before anything is recorded.
    """
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.title or block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            parts.append(context_block(block.resource.uri, block.resource.text))
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise RequestError.invalid_params(
                {"reason": f"jmp does not accept {kind} content; it accepts {ACCEPTED}"}
            )
    text = clean("".join(parts))  # JSON can carry lone surrogates; UTF-8 cannot
    if not text.strip():
        raise RequestError.invalid_params({"reason": "the prompt is empty"})
    return text
