"""The answer as it streams (acp_server/stream.py): every piece sent is a prefix of the recorded
answer, and no piece ever holds a part of a known secret or token (issue 24 item 2)."""

from __future__ import annotations

import random

import pytest

from acp_server.stream import AnswerStream, safe_cut
from acp_server.translator import CUT_OFF, Translator
from kernel.store.redact import Redactor
from protocol.codec import make_event
from protocol.events import FinalData

SECRET = "hunter2-secret-value-with spaces-9Qx"  # 36 characters, spaces inside
TOKEN = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
WS = __import__("pathlib").Path("/w")


def pieces(text: str, sizes: list[int]) -> list[tuple[int, str]]:
    out, at = [], 0
    for size in sizes:
        if at >= len(text):
            break
        out.append((at, text[at : at + size]))
        at += size
    if at < len(text):
        out.append((at, text[at:]))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_no_piece_ever_holds_part_of_a_secret(seed: int) -> None:
    rng = random.Random(seed)
    redactor = Redactor([SECRET])
    words = ["alpha", "beta", SECRET, TOKEN, "Bearer " + "t" * 24, "gamma\n", "  ", "delta"]
    answer = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
    stream = AnswerStream(redactor)
    sent = []
    for offset, text in pieces(answer, [rng.randint(1, 40) for _ in range(400)]):
        sent.append(stream.feed(offset, text))
    recorded = redactor.text(answer.strip())
    streamed = "".join(sent)
    assert recorded.startswith(streamed) and streamed == stream.sent
    for piece in sent:  # a piece alone never shows a fragment of 6+ characters of a key
        for key in (SECRET, TOKEN, "t" * 24):
            assert not any(key[i : i + 6] in piece for i in range(len(key) - 5)), piece


def test_a_cut_waits_for_the_longest_secret_and_a_word_start() -> None:
    secrets = frozenset({"x" * 10})
    assert safe_cut("one two three", frozenset()) == 8  # before "three": it may go on
    assert safe_cut("one two three", secrets) == 4  # 9 characters held back
    assert safe_cut("onetwothree", frozenset()) == 0  # no word start yet
    assert safe_cut("a " + "x" * 10 + " b", secrets) == 2  # never across a whole secret


def test_the_recorded_answer_sends_only_what_did_not_stream() -> None:
    redactor = Redactor([SECRET])
    translator = Translator(WS, None, redactor)
    answer = "Here is the plan. " * 8 + "Done."
    streamed = "".join(
        u.content.text for o, t in pieces(answer, [20] * 20) for u in translator.answer(o, t)
    )
    assert streamed and answer.startswith(streamed)
    final = make_event("a" * 32, 9, 0.0, FinalData(status="completed", summary=answer))
    (rest,) = spoken(translator.live(final))
    assert streamed + rest.content.text == answer


def test_a_cancel_after_streaming_says_the_answer_is_incomplete() -> None:
    translator = Translator(WS, None, Redactor([]))
    text = "Partial words before the cancel arrives. " * 4
    assert translator.answer(0, text)
    final = make_event("a" * 32, 9, 0.0, FinalData(status="cancelled", summary="Cancelled."))
    (notice,) = spoken(translator.live(final))
    assert notice.content.text == CUT_OFF


def test_a_resent_request_stops_the_stream_and_the_answer_follows_whole() -> None:
    translator = Translator(WS, None, Redactor([]))
    first = "First attempt at the answer, which the worker lost. " * 3
    assert translator.answer(0, first)
    assert translator.answer(0, "Second attempt") == []  # offset 0 again: started over
    final = make_event("a" * 32, 9, 0.0, FinalData(status="completed", summary="Second attempt."))
    (whole,) = spoken(translator.live(final))
    assert whole.content.text == "\n\nSecond attempt."


def spoken(updates: list) -> list:
    """The message updates of a final (its plan and session info beside them left out)."""
    return [u for u in updates if u.session_update == "agent_message_chunk"]


@pytest.mark.parametrize("width", [7, 60, 64, 76])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_wrapped_encoded_key_is_never_sent_a_line_at_a_time(width: int, eol: str) -> None:
    """An answer holding a `.env` printed by `base64` (or `xxd -p`) at some width: the stream
    never cuts inside the wrapped run (the redactor joins its lines to find the key), so no
    piece sent lets the key be decoded, and what was sent is a prefix of the recorded answer."""
    import base64
    import textwrap

    from tests.support.decoded import leaked

    key = "flashkey-Qw3rTy7uI0pAsDfGhJ+kL/zX"
    env = f"FLASH_API_KEY={key}\n".encode()
    dumps = [base64.b64encode(env).decode(), env.hex()]
    block = "".join(eol.join(textwrap.wrap(d, width)) + eol for d in dumps)
    answer = "Here is the file:" + eol + block + " and more words" * 20
    redactor = Redactor([key])
    stream = AnswerStream(redactor)
    for offset, text in pieces(answer, [3] * 2000):
        stream.feed(offset, text)
        assert not leaked(stream.sent, key, 4), stream.sent
    assert stream.sent and redactor.text(answer).startswith(stream.sent)
    assert "and more words" in stream.sent
