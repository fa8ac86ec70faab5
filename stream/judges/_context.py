"""A judge's context window: knowing its size, counting a prompt's tokens, shortening what does not fit.

A local model often has a small window (llama.cpp's server defaults to what it is started with, e.g.
2,048 tokens) and answers HTTP 400 ("maximum context length is 2048 tokens") to a longer prompt.
Instead of sending it, the client (:class:`~._client.JudgeClient`) shortens the prompt's longest
parts when the window is known:

- **size**: ``context_tokens`` in the judge's config; or ``auto``: asked of the server at start
  (llama.cpp's ``GET /props``: ``default_generation_settings.n_ctx``, and ``total_slots``, which
  caps the judge's concurrency); and in every case learned from a context-length error
  (:func:`context_limit` reads the size in the server's message), after which the call is shortened
  and sent again once.
- **counting**: the server's tokenizer when it has one (llama-cpp-python's ``POST
  /extras/tokenize/count``, llama.cpp's ``POST /tokenize``), else :func:`estimate_tokens`: one token
  per 2 bytes of UTF-8, an over-estimate for English (about 4 characters a token) and for Chinese (3
  bytes a character, one or two characters a token) alike. :data:`TEMPLATE_TOKENS` are added for
  the chat template's role markers.
- **room**: the prompt gets ``context - max_tokens - TEMPLATE_TOKENS`` tokens.
- **shortening** (:func:`fit_user`): the strings of the user message's data block (the output, the
  prompt or conversation thread, the references, the retrieved context) are cut from the longest
  down, each to the same length (water-filling), keeping the head and the tail with
  :data:`CUT_MARK` in the middle, so the first and last turns of a long thread stay; then the
  prompt is counted again (at most :data:`FIT_ROUNDS` rounds). A prompt that cannot be made to
  fit (the instructions alone are too long) is the judge's error
  (:class:`~._errors.JudgeContextTooLong`), never a request the server will refuse.

What was cut is reported on the verdict (a ``context:`` warning), in the window counter
``{judge}.truncated`` and in ``streameval_judge_prompts_truncated_total{judge}``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import Counter

from ._prompts import DATA_CLOSE, DATA_OPEN

__all__ = [
    "CUT_MARK",
    "FIT_ROUNDS",
    "TEMPLATE_TOKENS",
    "TRUNCATED",
    "TRUNCATION_WARNING",
    "Cut",
    "context_limit",
    "estimate_tokens",
    "fit_user",
    "names_format",
]

#: tokens allowed for the chat template around the two messages (role markers, BOS/EOS)
TEMPLATE_TOKENS = 48
#: counts and cuts at most this often per prompt
FIT_ROUNDS = 4
#: what replaces the middle of a shortened string
CUT_MARK = "[… {n} characters cut to fit the judge's context window …]"
#: how the verdict's warning about a shortened prompt starts
TRUNCATION_WARNING = "context: "
_SHRINK = 0.9  # aim under the room: the count of a cut text is not linear in its length

TRUNCATED = Counter(
    "streameval_judge_prompts_truncated",
    "judge prompts shortened to fit the judge's context window",
    ["judge"],
)

#: "maximum context length is 2048 tokens" (OpenAI, vLLM, llama-cpp-python), "context window of
#: 2048" (llama-cpp-python), "n_ctx": 2048 / "context size (2048)" (llama.cpp)
_LIMIT = re.compile(
    r"maximum context length (?:is|of) (\d+)|context window of (\d+)|\"n_ctx\"\s*:\s*(\d+)"
    r"|context (?:size|length) \((\d+)",
    re.IGNORECASE,
)
_CONTEXT_WORDS = re.compile(
    r"context length|context window|context size|n_ctx|too many tokens|prompt is too long", re.IGNORECASE
)
_FORMAT_WORDS = re.compile(
    r"response_format|json_schema|json_object|guided_json|structured_outputs|\bschema\b|grammar|tool_choice|\btools?\b",
    re.IGNORECASE,
)
_MAX_BODY = 65536


def context_limit(body: bytes) -> tuple[bool, int | None]:
    """(whether an error body says the prompt is too long, the window size it names or None)."""
    text = body[:_MAX_BODY].decode("utf-8", "replace")
    match = _LIMIT.search(text)
    if match:
        return True, int(next(g for g in match.groups() if g))
    return bool(_CONTEXT_WORDS.search(text)), None


def names_format(body: bytes) -> bool:
    """Whether an error body names the structured-output request (a refusal of the format)."""
    return bool(_FORMAT_WORDS.search(body[:_MAX_BODY].decode("utf-8", "replace")))


def estimate_tokens(text: str) -> int:
    """An over-estimate of ``text``'s tokens: one per 2 bytes of UTF-8."""
    return math.ceil(len(text.encode("utf-8")) / 2)


@dataclass(frozen=True, slots=True)
class Cut:
    """What :func:`fit_user` shortened: characters removed, and the fields they came from."""

    chars: int
    fields: tuple[str, ...]
    room: int  # the tokens the prompt had

    def warning(self, context: int) -> str:
        return (
            f"{TRUNCATION_WARNING}cut {self.chars} characters from {', '.join(self.fields)} to fit the judge's "
            f"{context}-token context window"
        )


Count = Callable[[str], Awaitable[int]]


async def fit_user(user: str, room: int, count: Count) -> tuple[str, Cut | None]:
    """``user`` shortened until ``count(user) <= room``; raises ValueError when it cannot be."""
    tokens = await count(user)
    if tokens <= room:
        return user, None
    head, data, tail = _split(user)
    leaves = _leaves(data, "") if data is not None else [("message", user)]
    original = {path: text for path, text in leaves}
    current = dict(original)
    for _ in range(FIT_ROUNDS):
        total = sum(len(t) for t in current.values())
        target = int(total * room / tokens * _SHRINK)
        cap = _water_level([len(t) for t in original.values()], target)
        if cap <= 0:
            break
        shortened = {path: _cut(text, cap) for path, text in original.items()}
        current = {path: text for path, (text, _) in shortened.items()}
        user = _render(head, data, tail, current) if data is not None else current["message"]
        tokens = await count(user)
        if tokens <= room:
            removed = {path: n for path, (_, n) in shortened.items() if n}
            fields = tuple(dict.fromkeys(p.split(".", 1)[0].split("[", 1)[0] for p in removed))
            return user, Cut(sum(removed.values()), fields, room)
    raise ValueError(
        f"the prompt needs {tokens} tokens and cannot be shortened to the {room} there is room for"
    )


def _split(user: str) -> tuple[str, Any, str]:
    """(text before the data, the data block's JSON, text after) or (user, None, "")."""
    before, sep, rest = user.partition(DATA_OPEN + "\n")
    block, sep2, after = rest.rpartition("\n" + DATA_CLOSE)
    if not sep or not sep2:
        return user, None, ""
    try:
        return before + sep, orjson.loads(block), sep2 + after
    except orjson.JSONDecodeError:
        return user, None, ""


def _leaves(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)] if path != "output_label" else []
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    return []


def _render(head: str, data: Any, tail: str, texts: dict[str, str]) -> str:
    def put(value: Any, path: str) -> Any:
        if isinstance(value, str):
            return texts.get(path, value)
        if isinstance(value, dict):
            return {k: put(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    text = orjson.dumps(put(data, "")).decode()
    # as data_block escapes it (streameval.judges._prompts): no tag can be closed early
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"{head}{text}{tail}"


def _water_level(lengths: list[int], target: int) -> int:
    """The largest cap with sum(min(length, cap)) <= target (0 when even 0 is over)."""
    if sum(lengths) <= target:
        return max(lengths, default=0)
    ordered = sorted(lengths)
    spent = 0
    for i, length in enumerate(ordered):
        remaining = len(ordered) - i
        if spent + length * remaining > target:
            return max(0, (target - spent) // remaining)
        spent += length
    return ordered[-1]


def _cut(text: str, cap: int) -> tuple[str, int]:
    """(``text`` in about ``cap`` characters: its head, the mark, its tail; characters removed)."""
    if len(text) <= cap:
        return text, 0
    keep = max(0, cap - len(CUT_MARK.format(n=len(text))))
    head = keep * 2 // 3
    tail = keep - head
    removed = len(text) - keep
    return text[:head] + CUT_MARK.format(n=removed) + (text[len(text) - tail :] if tail else ""), removed
