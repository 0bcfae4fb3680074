"""The live view's tail of a running command (workers/tool/live_output.py) and the cut rule it and
the view's clipping share (protocol/text.py): never more than a few characters of a cut word,
so a secret cut at the edge never shows a part the redactor cannot recognize."""

from __future__ import annotations

from protocol.text import PARTIAL_WORD_KEPT, head, tail
from workers.tool.live_output import RECENT_CHARS, tail_lines

KEY = "sk-live-9Qw8Er7Ty6Ui5Op4"


def test_a_cut_never_keeps_more_than_a_few_characters_of_a_word() -> None:
    text = f"key {KEY} end"
    for n in range(len(text)):
        kept = head(text, n)
        assert len(kept) <= n and (KEY in kept or not _shows_part(kept, KEY))
        kept = tail(text, n)
        assert len(kept) <= n and (KEY in kept or not _shows_part(kept, KEY))
    assert head("ab cd", 4) == "ab c"  # a short cut word is kept
    assert head(f"x {KEY}", 200, open_end=True) == "x "  # a stream that may go on
    assert head(f"x {KEY}\n", 200, open_end=True) == f"x {KEY}\n"


def _shows_part(kept: str, secret: str) -> bool:
    """Does `kept` show more than PARTIAL_WORD_KEPT characters of `secret` at one of its ends?"""
    n = PARTIAL_WORD_KEPT + 1
    return any(secret[:k] in kept or secret[-k:] in kept for k in range(n, len(secret)))


def test_the_tail_is_the_last_lines_as_a_terminal_shows_them() -> None:
    assert tail_lines("a\nb\nc\nd\n", complete=True) == "b\nc\nd"
    assert tail_lines("\x1b[31mred\x1b[0m\n10%\r50%\r90%\n") == "red\n90%"
    assert tail_lines("done\n\n###PS1JSON###\n{}", complete=True) == "done"
    assert tail_lines(f"printing {KEY}") == "printing"  # the key may still be being printed
    cut = "x" * RECENT_CHARS + f"\n{KEY} tail\nlast\n"
    assert tail_lines(cut[-RECENT_CHARS:], complete=True) == f"{KEY} tail\nlast"
    assert "xxx" not in tail_lines(("y" * 50 + "\n" + "x" * RECENT_CHARS)[-RECENT_CHARS:])
    one_line = (f"{KEY} " * 200)[-RECENT_CHARS:]  # starts inside a key
    assert tail_lines(one_line, complete=True).lstrip().startswith(KEY)
