"""Text that fits a platform: length in the platform's unit, and splitting at its limit
(docs/protocol.md, "Descriptor": ``max_message_length``, ``len_unit``).

Telegram counts UTF-16 code units, most others count characters, so one emoji can be
one unit or two. A reply longer than the limit is cut into pieces, each within it, at
the most readable boundary available: a paragraph break, else a line break, else a space,
else (a single unbroken run longer than the limit) between two characters. A cut never
lands inside a surrogate pair (we cut between code points, and a pair is one code
point) and, when it can be helped, never inside a fenced code block or between the parts
of a composed emoji (a ZWJ sequence, a skin-tone modifier, a flag).

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["first_piece", "split_text", "text_length"]

LenUnit = Literal["chars", "utf16"]

# A boundary is kept only if the piece before it fills at least this share of the
# window: a paragraph break 10 characters in must not leave a 10-character message when
# a line or word break near the limit is available.
_MIN_FILL = 0.5

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_LINE = re.compile(r"\n\s*")
_WORD = re.compile(r"\s+")
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)

_ZWJ = "\u200d"


def text_length(text: str, len_unit: str = "chars") -> int:
    """The length of ``text`` as a platform measures it: code points for ``chars``,
    UTF-16 code units for ``utf16`` (a character outside the BMP counts two)."""
    if len_unit == "utf16":
        return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
    return len(text)


def split_text(text: str, limit: int, len_unit: str = "chars") -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` units each (see the module
    docstring for where). Whitespace at a cut is dropped; nothing else is. A code block
    that must be cut anyway (it alone exceeds the limit) is closed at the end of its
    piece and reopened, with its opening line, at the start of the next, so each piece
    renders on its own. An empty text gives no pieces. A piece always holds at least one
    character, even when ``limit`` is smaller than that character (a limit of 1 and an
    astral character in ``utf16``): no platform has such a limit.
    """
    pieces: list[str] = []
    rest = text
    while rest:
        piece, rest = first_piece(rest, limit, len_unit)
        if piece.strip():
            pieces.append(piece)
    return pieces


def first_piece(text: str, limit: int, len_unit: str = "chars") -> tuple[str, str]:
    """The first piece `split_text` would cut from ``text``, and what is left to
    cut next: ``("".join of split_text(rest))`` continues where the piece stopped. The
    rest starts with the reopened fence line when the cut fell inside a code block.
    ``text`` fits whole: ``(text, "")``. Streaming replies use this to finalise one
    message while the text keeps growing."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1 unit, got {limit!r}")
    window_end = _window_end(text, 0, limit, len_unit)
    if window_end == len(text):
        return text, ""
    lead = _skip_space(text, 0)
    if lead:
        # Whitespace at a cut is dropped, and so is whitespace before the first piece:
        # a boundary must have text before it, so a text that opens with a newline and
        # then a code block that fits would otherwise offer no cut outside the block.
        return first_piece(text[lead:], limit, len_unit)
    fences = _fences(text)
    cut, resume = _choose_cut(text, 0, window_end, fences)
    fence = _fence_at(fences, cut)
    if fence is None:
        return text[:cut], text[resume:]
    closing = "\n" + fence.marker
    reserve = text_length(closing, len_unit)
    reopen = fence.opening + "\n"
    if limit - reserve <= 0 or text_length(reopen, len_unit) + reserve >= limit:
        return text[:cut], text[resume:]  # a fence line as long as the limit: cut plainly
    window_end = _window_end(text, 0, limit - reserve, len_unit)
    cut, resume = _choose_cut(text, 0, window_end, fences)
    fence = _fence_at(fences, cut)
    if fence is None or cut <= fence.start + len(fence.opening):
        # Outside, or no code before the cut (reopening would make no progress).
        return text[:cut], text[resume:]
    if resume >= fence.closing:
        # Only the closing marker is left of the block: it ends this piece.
        return text[:cut] + closing, text[_skip_space(text, fence.end) :]
    return text[:cut] + closing, reopen + text[resume:]


def _window_end(text: str, start: int, limit: int, len_unit: str) -> int:
    """The largest ``end`` such that ``text[start:end]`` is within ``limit`` units
    (always at least one character past ``start``)."""
    end = min(len(text), start + limit)
    if len_unit != "utf16":
        return end
    units = 0
    for index in range(start, len(text)):
        units += 2 if ord(text[index]) > 0xFFFF else 1
        if units > limit:
            return max(index, start + 1)
    return len(text)


def _choose_cut(text: str, start: int, end: int, fences: list[_Fence]) -> tuple[int, int]:
    """Where to end the piece that starts at ``start`` and may reach ``end``: returns
    (end of this piece, start of the next), the whitespace between them dropped."""
    full = end - start
    candidates = [
        list(_boundaries(pattern, text, start, end)) for pattern in (_PARAGRAPH, _LINE, _WORD)
    ]
    # 1. the finest-grained readable cut near the limit, outside any code fence;
    for found in candidates:
        for cut, resume in reversed(found):
            if cut - start < full * _MIN_FILL:
                break
            if not _inside(fences, cut):
                return cut, resume
    # 2. any cut outside a fence (a short piece beats a split code block);
    for found in candidates:
        for cut, resume in reversed(found):
            if not _inside(fences, cut):
                return cut, resume
    # 3. a fence longer than the limit has to be cut: at a line, else a word;
    lines, words = candidates[1], candidates[2]
    if lines and (lines[-1][0] - start >= full * _MIN_FILL or not words):
        return lines[-1]
    if words:
        return words[-1]
    # 4. one unbroken run: between characters, not inside a composed emoji.
    cut = _hard_cut(text, start, end)
    return cut, cut


def _boundaries(
    pattern: re.Pattern[str], text: str, start: int, end: int
) -> Iterator[tuple[int, int]]:
    # A whitespace run that starts inside the window is a boundary even if it runs on
    # past the window: the whitespace is dropped, not sent. The piece before it must
    # hold something other than whitespace.
    for match in pattern.finditer(text, start, min(len(text), end + 1)):
        cut = match.start()
        if cut <= start or cut > end or not text[start:cut].strip():
            continue
        resume = match.end()
        # The run may continue past what the pattern matched (its search stopped at end+1).
        while resume < len(text) and text[resume].isspace():
            resume += 1
        yield cut, resume


@dataclass(frozen=True)
class _Fence:
    """One fenced code block: ``start`` (its opening line), ``closing`` (where the
    closing marker begins; the text's end if unclosed), ``end`` (after the closing
    line), the opening line itself and its marker (three backticks or tildes)."""

    start: int
    closing: int
    end: int
    opening: str
    marker: str


def _fences(text: str) -> list[_Fence]:
    marks = list(_FENCE.finditer(text))
    fences: list[_Fence] = []
    index = 0
    while index < len(marks):
        opening = marks[index]
        marker = opening.group(1)
        line_end = text.find("\n", opening.start())
        opening_line = text[opening.start() : len(text) if line_end < 0 else line_end]
        # The block ends at the next fence line of the same marker.
        close_index = next(
            (j for j in range(index + 1, len(marks)) if marks[j].group(1) == marker), None
        )
        if close_index is None:
            fences.append(_Fence(opening.start(), len(text), len(text), opening_line, marker))
            break
        closing = marks[close_index]
        close_end = text.find("\n", closing.start())
        end = len(text) if close_end < 0 else close_end
        fences.append(
            _Fence(opening.start(), closing.end() - len(marker), end, opening_line, marker)
        )
        index = close_index + 1
    return fences


def _fence_at(fences: list[_Fence], position: int) -> _Fence | None:
    """The code block strictly containing ``position``, if any."""
    for fence in fences:
        if fence.start < position < fence.end:
            return fence
        if fence.start >= position:
            break
    return None


def _inside(fences: list[_Fence], position: int) -> bool:
    return _fence_at(fences, position) is not None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _hard_cut(text: str, start: int, end: int) -> int:
    cut = end
    while cut > start + 1 and _joined(text, cut):
        cut -= 1
    # A run made entirely of one composed cluster longer than the limit: cut anyway.
    return cut if cut > start else end


def _joined(text: str, cut: int) -> bool:
    """Whether ``text[cut - 1]`` and ``text[cut]`` belong to one visible character."""
    before, after = text[cut - 1], text[cut]
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return True  # a surrogate pair spelled as two code points (e.g. from a decoder)
    if before == _ZWJ or after == _ZWJ:
        return True
    if unicodedata.combining(after) or "\ufe00" <= after <= "\ufe0f":
        return True  # a combining mark or a variation selector attaches to its base
    if "\U0001f3fb" <= after <= "\U0001f3ff":
        return True  # skin-tone modifier
    if "\U000e0020" <= after <= "\U000e007f":
        return True  # tag characters of a subdivision flag
    if _regional(after) and _regional(before):
        # Flags are pairs of regional indicators: cut only between pairs.
        run = 0
        index = cut - 1
        while index >= 0 and _regional(text[index]):
            run += 1
            index -= 1
        return run % 2 == 1
    return False


def _regional(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"
