"""text_length and split_text: units, boundaries, fences, emoji (docs/protocol.md,
"Descriptor": max_message_length, len_unit)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_relay._core.text import first_piece, split_text, text_length

ASTRAL = "😀🎉𝄞𠀋"  # emoji, a musical symbol, a CJK extension-B ideograph: 2 UTF-16 units each


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@pytest.mark.parametrize(
    ("text", "chars", "utf16"),
    [
        ("", 0, 0),
        ("hello", 5, 5),
        ("é", 1, 1),
        ("😀", 1, 2),
        ("a😀b", 3, 4),
        ("👍🏽", 2, 4),  # base + skin tone: two astral code points
        ("👨‍👩‍👧", 5, 8),  # ZWJ family: three astral emoji and two ZWJs
        ("🇫🇷", 2, 4),
        (ASTRAL, 4, 8),
    ],
)
def test_text_length(text: str, chars: int, utf16: int) -> None:
    assert text_length(text, "chars") == chars
    assert text_length(text, "utf16") == utf16 == units(text)


def test_short_text_is_one_piece_and_empty_is_none() -> None:
    assert split_text("hello", 5) == ["hello"]
    assert split_text("", 5) == []
    assert split_text("   \n\n ", 2) == []


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        split_text("x", 0)


def test_paragraph_before_line_before_word() -> None:
    text = "first paragraph here\n\nsecond line one\nsecond line two"
    assert split_text(text, 40) == ["first paragraph here", "second line one\nsecond line two"]
    text = "one two three\nfour five six seven"
    assert split_text(text, 25) == ["one two three", "four five six seven"]
    assert split_text("alpha beta gamma delta", 12) == ["alpha beta", "gamma delta"]


def test_a_far_back_paragraph_break_does_not_make_a_tiny_piece() -> None:
    # The paragraph break is 3 characters into a 20-character window: a word break
    # near the limit gives a fuller piece.
    text = "Hi.\n\nthis sentence has many words in it"
    assert split_text(text, 20) == ["Hi.\n\nthis sentence", "has many words in it"]


def test_unbroken_run_is_cut_between_characters() -> None:
    assert split_text("abcdefghij", 4) == ["abcd", "efgh", "ij"]


def test_utf16_counts_astral_as_two() -> None:
    assert split_text("😀" * 5, 4, "utf16") == ["😀😀", "😀😀", "😀"]
    assert split_text("😀" * 5, 4, "chars") == ["😀😀😀😀", "😀"]
    # An odd limit: a pair never straddles a cut; the piece holds one unit less.
    assert split_text("😀" * 3, 3, "utf16") == ["😀", "😀", "😀"]
    assert split_text("a😀😀", 3, "utf16") == ["a😀", "😀"]


def test_surrogate_pair_spelled_as_two_code_points_is_not_cut() -> None:
    pair = "\ud83d\ude00"  # what a lenient decoder may leave: 😀 as two code points
    assert split_text("ab" + pair, 3, "chars") == ["ab", pair]


@pytest.mark.parametrize(
    "cluster",
    ["👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "e\u0301", "❤\ufe0f"],  # tone, ZWJ, flag, accent, VS-16
)
def test_composed_characters_are_not_cut(cluster: str) -> None:
    text = cluster * 4
    limit = text_length(cluster, "utf16") + 1  # room for one cluster and a bit
    pieces = split_text(text, limit, "utf16")
    assert pieces == [cluster] * 4


def test_flags_are_cut_between_pairs() -> None:
    assert split_text("🇫🇷🇩🇪🇮🇹", 3) == ["🇫🇷", "🇩🇪", "🇮🇹"]


def test_code_fence_is_kept_whole_when_it_fits_a_piece() -> None:
    text = "Here is the code:\n\n```python\nx = 1\ny = 2\n```\n\nThat was it."
    pieces = split_text(text, 36)
    assert "```python\nx = 1\ny = 2\n```" in pieces
    assert pieces[0] == "Here is the code:"


def test_code_fence_longer_than_limit_is_closed_and_reopened() -> None:
    code = "\n".join(f"line {i}" for i in range(12))
    text = f"```py\n{code}\n```\nafter text"
    pieces = split_text(text, 40)
    assert all(len(p) <= 40 for p in pieces)
    for piece in pieces[:-1]:
        assert piece.startswith("```py\n") and piece.endswith("\n```"), piece
    assert pieces[-1] == "after text"
    body = [line for p in pieces for line in p.splitlines() if line.startswith("line")]
    assert body == code.splitlines()


def test_tilde_fence_and_unclosed_fence() -> None:
    text = "~~~\n" + "word " * 20
    pieces = split_text(text, 30)
    assert all(p.startswith("~~~\n") for p in pieces)
    assert all(len(p) <= 30 for p in pieces)


# --- properties -------------------------------------------------------------------

ALPHABET = st.sampled_from(
    [*"ab cd\n\t", "\n\n", "😀", "𝄞", "é", "\u0301", "\u200d", "🏽", "🇫", "🇷", "漢"]
)
TEXTS = st.lists(ALPHABET, max_size=200).map("".join)


def _is_in_order(text: str, pieces: list[str]) -> bool:
    """Each piece is the next slice of ``text``; only whitespace lies between."""
    position = 0
    for piece in pieces:
        found = text.find(piece, position)
        if found < 0 or text[position:found].strip():
            return False
        position = found + len(piece)
    return not text[position:].strip()


@settings(max_examples=400, deadline=None)
@given(text=TEXTS, limit=st.integers(2, 40), unit=st.sampled_from(["chars", "utf16"]))
def test_pieces_fit_and_keep_everything_in_order(text: str, limit: int, unit: str) -> None:
    pieces = split_text(text, limit, unit)
    assert all(text_length(p, unit) <= limit for p in pieces)
    assert all(p.strip() for p in pieces)
    assert _is_in_order(text, pieces)
    # Nothing but whitespace is ever dropped.
    assert re.sub(r"\s", "", "".join(pieces)) == re.sub(r"\s", "", text)


@settings(max_examples=200, deadline=None)
@given(text=TEXTS, limit=st.integers(2, 40))
def test_utf16_pieces_encode_cleanly(text: str, limit: int) -> None:
    for piece in split_text(text, limit, "utf16"):
        piece.encode("utf-16-le")  # a lone surrogate would raise here
        assert units(piece) <= limit


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(st.sampled_from(["word", "\n", " ", "\n\n"]), max_size=30).map("".join),
    lines=st.lists(st.text("xyz =1", min_size=1, max_size=8), min_size=1, max_size=6),
    after=st.lists(st.sampled_from(["word", "\n", " "]), max_size=30).map("".join),
    limit=st.integers(60, 120),
)
def test_a_fence_that_fits_is_never_cut(
    before: str, lines: list[str], after: str, limit: int
) -> None:
    block = "```\n" + "\n".join(lines) + "\n```"
    text = f"{before}\n{block}\n{after}"
    pieces = split_text(text, limit)
    assert any(block in piece for piece in pieces), pieces
    assert all(piece.count("```") % 2 == 0 for piece in pieces), pieces


def test_first_piece() -> None:
    assert first_piece("short", 10) == ("short", "")
    assert first_piece("alpha beta gamma", 11) == ("alpha beta", "gamma")
    piece, rest = first_piece("```py\n" + "x = 1\n" * 10 + "```\nend", 30)
    assert piece.endswith("\n```") and rest.startswith("```py\n")


@pytest.mark.parametrize(
    "text", ["```\n" + "x" * 100, "```\n" + "word " * 40, "~~~\n\n\n" + "y " * 50 + "\n~~~"]
)
def test_fence_opening_alone_always_makes_progress(text: str) -> None:
    pieces = split_text(text, 12)
    assert all(len(p) <= 12 for p in pieces)
    assert sum(p.count("x") + p.count("word") + p.count("y") for p in pieces) == sum(
        text.count(s) for s in ("x", "word", "y")
    )


FENCED = st.lists(
    st.sampled_from(["```", "```py", "~~~", "\n", "\n\n", "code", " ", "😀", "x"]), max_size=80
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=FENCED, limit=st.integers(2, 30), unit=st.sampled_from(["chars", "utf16"]))
def test_first_piece_always_progresses_and_fits(text: str, limit: int, unit: str) -> None:
    rest = text
    for _ in range(len(text) + 1):
        if not rest:
            break
        piece, after = first_piece(rest, limit, unit)
        assert text_length(piece, unit) <= limit or len(piece) == 1
        assert len(after) < len(rest)
        rest = after
    else:
        pytest.fail("first_piece made no progress")


@pytest.mark.parametrize("lines", [2, 3])
def test_a_fence_that_fits_after_leading_whitespace_is_not_cut(lines: int) -> None:
    # Found by Hypothesis: a text opening with a newline offered no boundary before the
    # block (a cut needs text before it), so a block that fitted was closed and reopened.
    block = "```\n" + "\n".join(["11111111"] * lines) + "\n```"
    pieces = split_text(f"\n{block}\ntail", len(block))
    assert pieces == [block, "tail"]
