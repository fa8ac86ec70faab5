"""Small text helpers shared by the rule evaluators."""

from __future__ import annotations

import regex

__all__ = ["word_tokens"]

# A CJK ideograph / kana / hangul syllable is a token of its own; other runs of letters, digits and
# underscores are words. So "GPT-4 是模型" -> ["gpt", "4", "是", "模", "型"].
# (The regex module counts Han as letters, so the word class must subtract CJK explicitly: without the
# set difference "GPT-4是模型" would give ["gpt", "4是模型"].)
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_TOKEN = regex.compile(rf"[{_CJK}]|[[\p{{L}}\p{{N}}_]--[{_CJK}]]+", regex.V1)


def word_tokens(text: str) -> list[str]:
    """Case-folded word tokens of ``text``, one token per CJK character."""
    return _TOKEN.findall(text.casefold())
