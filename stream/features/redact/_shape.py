"""Where the detectors look: a text's shape, computed once per text (streameval.features.redact._detectors)."""

from __future__ import annotations

import re

__all__ = ["Shape"]

# Digits 0-9 -> "0", A-Z -> "A", every other byte as it is: the text's shape, one byte per character
_SHAPE_TABLE = bytes(
    ord("0") if chr(b).isdigit() else ord("A") if "A" <= chr(b) <= "Z" else b for b in range(256)
)
# Runs of 4+ digits with single or double separators ([ ().-]) between them: the runs of the pattern
# 0(?:[ ().-]{0,2}0){3,}, whose nested repeat cost the standard library's engine about twice as much as
# this: chains of digits and separators (a simple repeat, in the shape where digits are "0"), each cut
# where three separators or more follow each other (rare), of which those with 4 digits are runs
# (tests/features/redact pins them to the pattern).
_CHAIN = re.compile(rb"0[0 ().-]{3,}(?<=0)")
_GAP = re.compile(rb"[ ().-]{3,}")
_TWO_CAPITALS = re.compile(rb"AA")  # a literal prefix the engine looks for itself: faster than `in`
_IBAN_START = re.compile(rb"AA00")
_MARGIN = 4  # characters each side of a run: the patterns' look-behinds and look-aheads read them
# The API key prefixes, by a byte each of them holds: most texts lack some of these bytes, and a missing
# byte (one memchr) spares the scans for its prefixes. The AWS and Google ones also hold two capitals in a
# row ("AA" in the shape).
_KEY_PREFIXES = (
    (b"-", (b"sk-",)),
    (b"_", (b"sk_live_", b"rk_live_", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_")),
    (b"x", (b"xox",)),
    (b"A", (b"AKIA", b"ASIA", b"ABIA", b"ACCA", b"AIza")),
)


class Shape:
    """What the detectors share of one text, computed once: its ASCII bytes (every other character one
    ``?``, so byte offsets are character offsets) for cheap ``in`` tests, and the windows where numbers are.

    Scanning a text of mixed scripts for a character class costs the ``regex`` package ~20 ns a character
    (bench/redact.py); a literal costs far less. So the numeric detectors look only inside the windows of
    :meth:`numbers` (runs of 4+ digits, found in the shape, where each run starts at a literal ``0``),
    which cover every number they can match, and the IBAN detector only from each ``AA00`` on."""

    __slots__ = ("_keys", "_numbers", "_two_capitals", "ascii", "shape")

    def __init__(self, text: str) -> None:
        self.ascii = text.encode("ascii", "replace")
        self.shape = self.ascii.translate(_SHAPE_TABLE)
        self._numbers: list[tuple[int, int]] | None = None
        self._keys: list[tuple[int, int]] | None = None
        self._two_capitals: bool | None = None

    def numbers(self) -> list[tuple[int, int]]:
        """(start, end) windows around the runs of digits, merged where they touch."""
        if self._numbers is None:
            shape, end_of_text = self.shape, len(self.shape)
            out: list[tuple[int, int]] = []
            for m in _CHAIN.finditer(shape):
                start, end = m.span()
                chains = [(start, end)]
                if _GAP.search(shape, start, end) is not None:
                    chains = []
                    for gap in _GAP.finditer(shape, start, end):
                        chains.append((start, gap.start()))
                        start = gap.end()
                    chains.append((start, end))
                for start, end in chains:
                    # 3 digits fill 7 characters at most
                    if end - start > 7 or shape.count(b"0", start, end) >= 4:
                        lo, hi = max(0, start - _MARGIN), min(end_of_text, end + _MARGIN)
                        if out and lo <= out[-1][1]:
                            out[-1] = (out[-1][0], hi)
                        else:
                            out.append((lo, hi))
            self._numbers = out
        return self._numbers

    def keys(self) -> list[tuple[int, int]]:
        """Windows from each API key prefix on (the longest key the pattern takes fits in them)."""
        if self._keys is None:
            data, starts = self.ascii, []
            for byte, literals in _KEY_PREFIXES:
                if byte not in data or (byte == b"A" and not self.two_capitals()):
                    continue
                for literal in literals:
                    at = data.find(literal)
                    while at >= 0:
                        starts.append(at)
                        at = data.find(literal, at + 1)
            out: list[tuple[int, int]] = []
            for at in sorted(starts):
                hi = min(len(data), at + 300)
                if out and at <= out[-1][1]:
                    out[-1] = (out[-1][0], hi)
                else:
                    out.append((at, hi))
            self._keys = out
        return self._keys

    def two_capitals(self) -> bool:
        """Whether two capital letters follow each other somewhere (every IBAN, AWS and Google key has)."""
        if self._two_capitals is None:
            self._two_capitals = b"A" in self.shape and _TWO_CAPITALS.search(self.shape) is not None
        return self._two_capitals

    def iban_starts(self) -> list[tuple[int, int]]:
        end_of_text = len(self.shape)
        return [(m.start(), min(end_of_text, m.start() + 42)) for m in _IBAN_START.finditer(self.shape)]
