"""Language helpers of the text metrics: answer normalisation, CJK detection, Chinese word segmentation,
stop words and keyword extraction. Everything here is built once at import (regexes, translation tables,
stop-word sets, the rjieba segmenter), never per event.

Normalisation is SQuAD's ``normalize_answer`` (lower case, drop ASCII punctuation, drop the English
articles a/an/the, squeeze whitespace) extended for Chinese text: NFKC first, so full-width forms
(``ＡＢＣ１２３，！``) become their ASCII twins, and CJK punctuation (``，。、「」《》…``), general
punctuation (``“”‘’—…``) and the middle dot are dropped like ASCII punctuation. On pure-ASCII text the
result is exactly SQuAD's.
"""

from __future__ import annotations

import re
import string
import unicodedata

import regex
import rjieba
import stopwordsiso

__all__ = [
    "EN_STOP_WORDS",
    "ZH_STOP_WORDS",
    "answer_tokens",
    "cjk_tokens",
    "content_tokens",
    "has_cjk",
    "keywords",
    "normalize_answer",
    "segment",
    "squad_tokens",
]

_CJK_CLASS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_CJK = regex.compile(f"[{_CJK_CLASS}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")  # SQuAD: re.sub(r'\b(a|an|the)\b', ' ', text)
_ARTICLE_WORDS = frozenset(("a", "an", "the"))
_ASCII_PUNCT = str.maketrans("", "", string.punctuation)


def _unicode_punct_table() -> dict[int, None]:
    """Punctuation (Unicode category P*) of the blocks Chinese text uses, plus ASCII punctuation."""
    blocks = [
        (0x00A0, 0x00BF),
        (0x2000, 0x206F),
        (0x3000, 0x303F),
        (0xFE10, 0xFE1F),
        (0xFE30, 0xFE6F),
        (0xFF00, 0xFFEF),
    ]
    table: dict[int, None] = {ord(c): None for c in string.punctuation}
    for lo, hi in blocks:
        for code in range(lo, hi + 1):
            if unicodedata.category(chr(code)).startswith("P"):
                table[code] = None
    return table


_UNICODE_PUNCT = _unicode_punct_table()

#: Chinese stop words (stopwordsiso "zh", 794 words) — only entries that contain a CJK character.
ZH_STOP_WORDS: frozenset[str] = frozenset(w for w in stopwordsiso.stopwords("zh") if _CJK.search(w))
#: English stop words (stopwordsiso "en").
EN_STOP_WORDS: frozenset[str] = frozenset(stopwordsiso.stopwords("en"))
_ALL_STOP_WORDS = ZH_STOP_WORDS | EN_STOP_WORDS

# One token per CJK character, otherwise runs of letters and digits (rouge-score's tokenizer keeps
# [a-z0-9]+ runs; this is the same on ASCII text and splits CJK text per character).
_CJK_TOKEN = regex.compile(f"[{_CJK_CLASS}]|[[\\p{{L}}\\p{{N}}]--[{_CJK_CLASS}]]+", regex.V1)
# On ASCII text the tokens are the runs of [a-z0-9] after lower(): one translate() (A-Z to a-z, every other
# non-alphanumeric character to a space) and a split() give them ~3x faster than re.findall.
_ASCII_TOKEN_TABLE = str.maketrans(
    {chr(c): (chr(c).lower() if chr(c).isalnum() else " ") for c in range(128)}
)
_WORD = re.compile(r"\w+")


def has_cjk(text: str) -> bool:
    """True when ``text`` holds at least one CJK ideograph, kana or hangul syllable."""
    return not text.isascii() and _CJK.search(text) is not None


def _answer_words(text: str) -> list[str]:
    """The words of :func:`normalize_answer` (the normalised text is these joined with spaces)."""
    if text.isascii():
        text = text.lower().translate(_ASCII_PUNCT)
    else:
        text = unicodedata.normalize("NFKC", text).lower().translate(_UNICODE_PUNCT)
    words = text.split()
    if "".join(words).isalnum():
        # Every word is then one run of \w characters (re's \w is str.isalnum() or "_"), so \b(a|an|the)\b
        # matches exactly the words "a", "an", "the": drop them without the regex pass (4x faster).
        return [word for word in words if word not in _ARTICLE_WORDS]
    return _ARTICLES.sub(" ", text).split()


def normalize_answer(text: str) -> str:
    """SQuAD normalisation plus full-width forms and CJK/general punctuation (see the module doc)."""
    return " ".join(_answer_words(text))


def answer_tokens(text: str, *, chinese: str = "words") -> list[str]:
    """``squad_tokens(normalize_answer(text), chinese=chinese)``, without re-splitting ASCII text."""
    words = _answer_words(text)
    if text.isascii():  # no CJK: squad_tokens would split the joined words again
        return words
    return squad_tokens(" ".join(words), chinese=chinese)


def segment(text: str) -> list[str]:
    """rjieba words of ``text`` without whitespace tokens."""
    return [w for w in rjieba.cut(text) if not w.isspace()]


def squad_tokens(normalized: str, *, chinese: str = "words") -> list[str]:
    """Tokens of an already normalised answer for token F1.

    Text without CJK characters: ``str.split()`` (SQuAD exactly). Text with CJK: ``chinese="words"``
    segments with rjieba and drops Chinese stop words, falling back to one token per CJK character
    (other words kept whole) when nothing is left; ``chinese="chars"`` always uses that character level.
    """
    if not has_cjk(normalized):
        return normalized.split()
    if chinese == "words":
        words = [w for w in segment(normalized) if w not in ZH_STOP_WORDS]
        if words:
            return words
    chars: list[str] = _CJK_TOKEN.findall(normalized)
    return chars


def cjk_tokens(text: str) -> list[str]:
    """Case-folded word tokens: one per CJK character, otherwise runs of letters and digits (ROUGE-L,
    report word counts)."""
    if text.isascii():
        return text.translate(_ASCII_TOKEN_TABLE).split()
    tokens: list[str] = _CJK_TOKEN.findall(text.casefold())
    return tokens


def content_tokens(text: str) -> list[str]:
    """Content words of ``text`` (any language): lower case, CJK segmented with rjieba, words of one
    character and stop words (stopwordsiso zh + en) dropped. Used by keyword_match and the RAG metrics."""
    lowered = normalize_answer(text)
    if has_cjk(lowered):
        # rjieba may keep mixed runs; \w+ splits them like the spec's re.findall(r'\b\w+\b')
        words = [
            w
            for piece in segment(lowered)
            for w in (_WORD.findall(piece) if not piece.isalnum() else (piece,))
        ]
    else:
        words = _WORD.findall(lowered)
    return [w for w in words if len(w) > 1 and w not in _ALL_STOP_WORDS]


def keywords(text: str) -> list[str]:
    """Distinct content words of ``text`` in order of first appearance (question keywords)."""
    return list(dict.fromkeys(content_tokens(text)))
