"""BLEU: ``bleu`` (sentence BLEU equal to sacrebleu's) and ``bleu_simple`` (the agent-metrics spec's n-gram precision).

``bleu`` reproduces ``sacrebleu.sentence_bleu(hyp, refs, smooth_method="exp", tokenize=...,
use_effective_order=True)`` divided by 100: the 13a (mteval-v13a) and zh tokenisers, clipped n-gram
counts against the per-n-gram maximum over references, the closest reference length (ties: the
shorter) for the brevity penalty, exp smoothing (= nltk method3) and effective order.
tests/evaluators/test_metrics_reference.py checks it against sacrebleu to 1e-9. sacrebleu itself is
only a test dependency.

The zh tokeniser reproduces a quirk of sacrebleu's range table: the entries written ``'\\u20000'`` and
``'\\u2f800'`` are two-character strings, so sacrebleu's string comparison treats U+2001-U+2A6D and
U+2F81-U+2FA1 (general punctuation, arrows, maths symbols, ...) as Chinese characters. We do the same
so scores stay equal.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field

from ..models import RequestEvent
from ._base import Evaluator, Params, Score, register
from ._lang import cjk_tokens, has_cjk

__all__ = ["Bleu", "BleuResult", "BleuSimple", "bleu_simple", "sentence_bleu", "tokenize_13a", "tokenize_zh"]

# mteval-v13a post-tokenisation (sacrebleu TokenizerRegexp), applied in this order:
#   ([\{-\~\[-\`!-\&\(-\+\:-\@\/]) -> " \1 "   symbols
#   ([^0-9])([\.,])                   -> "\1 \2 "   period/comma after a non-digit
#   ([\.,])([^0-9])                   -> " \1 \2"   period/comma before a non-digit
#   ([0-9])(-)                        -> "\1 \2 "   dash after a digit
# sacrebleu's first class also holds the space (" -&"); padding a space with spaces changes nothing once the
# line is split and no later pattern tells one space from three, so the space is left out here (a 3x speed-up).
# The symbols are padded with re.split + join (the same string as the sub, without a template expansion per
# match); the other three passes walk the few "." "," "-" positions with the regexes' leftmost,
# non-overlapping matching (the [^0-9] patterns otherwise try every character: ~3x slower on prose).
# tests/evaluators/test_metrics_fastpath.py checks each pass against its regex and the whole against sacrebleu.
_SYMBOLS = re.compile(r"([\{-\~\[-\`!-\&\(-\+\:-\@\/])")
_PERIOD_COMMA = re.compile(r"[.,]")
_DIGITS = frozenset("0123456789")


def _pad_period_comma_after_non_digit(line: str) -> str:
    r"""``re.sub(r"([^0-9])([\.,])", r"\1 \2 ", line)``."""
    out: list[str] = []
    last = free = 0  # free: the first position no earlier match consumed
    for match in _PERIOD_COMMA.finditer(line):
        at = match.start()
        if at - 1 < free or line[at - 1] in _DIGITS:
            continue
        out += (line[last:at], " ", line[at], " ")
        last = free = at + 1
    out.append(line[last:])
    return "".join(out)


def _pad_period_comma_before_non_digit(line: str) -> str:
    r"""``re.sub(r"([\.,])([^0-9])", r" \1 \2", line)``."""
    out: list[str] = []
    last = free = 0
    end = len(line) - 1
    for match in _PERIOD_COMMA.finditer(line):
        at = match.start()
        if at < free or at == end or line[at + 1] in _DIGITS:
            continue
        out += (line[last:at], " ", line[at], " ")
        last, free = at + 1, at + 2
    out.append(line[last:])
    return "".join(out)


def _pad_dash_after_digit(line: str) -> str:
    r"""``re.sub(r"([0-9])(-)", r"\1 \2 ", line)`` (a match ends at a "-", so none consumes the next one's digit)."""
    out: list[str] = []
    last = 0
    at = line.find("-")
    while at >= 0:
        if at and line[at - 1] in _DIGITS:
            out += (line[last:at], " - ")
            last = at + 1
        at = line.find("-", at + 1)
    out.append(line[last:])
    return "".join(out)


def _post_tokenize(line: str) -> list[str]:
    line = " ".join(_SYMBOLS.split(line))
    if "." in line or "," in line:
        line = _pad_period_comma_before_non_digit(_pad_period_comma_after_non_digit(line))
    if "-" in line:
        line = _pad_dash_after_digit(line)
    return line.split()


def tokenize_13a(line: str) -> list[str]:
    """sacrebleu's ``13a`` tokeniser, as a token list."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return _post_tokenize(f" {line} ")


# sacrebleu tokenizer_zh._UCODE_RANGES, written as sacrebleu writes them (see the module docstring).
_ZH_RANGES = [
    ("\u3400", "\u4db5"),
    ("\u4e00", "\u9fa5"),
    ("\u9fa6", "\u9fbb"),
    ("\uf900", "\ufa2d"),
    ("\ufa30", "\ufa6a"),
    ("\ufa70", "\ufad9"),
    ("\u20000", "\u2a6d6"),
    ("\u2f800", "\u2fa1d"),
    ("\uff00", "\uffef"),
    ("\u2e80", "\u2eff"),
    ("\u3000", "\u303f"),
    ("\u31c0", "\u31ef"),
    ("\u2f00", "\u2fdf"),
    ("\u2ff0", "\u2fff"),
    ("\u3100", "\u312f"),
    ("\u31a0", "\u31bf"),
    ("\ufe10", "\ufe1f"),
    ("\ufe30", "\ufe4f"),
    ("\u2600", "\u26ff"),
    ("\u2700", "\u27bf"),
    ("\u3200", "\u32ff"),
    ("\u3300", "\u33ff"),
]


def _zh_run() -> re.Pattern[str]:
    # For one character c: c >= "ab" iff c > "a", and c <= "xy" iff c <= "x" (a prefix sorts first).
    parts = []
    for start, end in _ZH_RANGES:
        lo = start if len(start) == 1 else chr(ord(start[0]) + 1)
        hi = end[0]
        parts.append(f"{re.escape(lo)}-{re.escape(hi)}")
    return re.compile(f"[{''.join(parts)}]+")


_ZH_RUN = _zh_run()


def _spread(match: re.Match[str]) -> str:
    return " " + " ".join(match.group()) + " "


def tokenize_zh(line: str) -> list[str]:
    """sacrebleu's ``zh`` tokeniser: every Chinese character is a token, the rest is 13a post-tokenised."""
    return _post_tokenize(_ZH_RUN.sub(_spread, line.strip()))


_TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"13a": tokenize_13a, "zh": tokenize_zh}


def _order_grams(tokens: Sequence[str], n: int) -> Iterable[Hashable]:
    """The ``n``-grams of ``tokens``; unigrams are the tokens themselves (cheaper to hash than 1-tuples)."""
    return tokens if n == 1 else zip(*(tokens[i:] for i in range(n)), strict=False)


def _order_counts(tokens: Sequence[str], n: int) -> Counter[Hashable]:
    return Counter(_order_grams(tokens, n))


def _clipped_matches(hyp: Sequence[str], refs: Sequence[Sequence[str]], max_order: int) -> list[int]:
    """Per order, the hypothesis n-gram count clipped by the largest count in any one reference.

    One ``Counter`` per order and side, and only hypothesis n-grams are looked up: a reference n-gram
    the hypothesis lacks cannot add a match, so no merged reference table is built. ``sum(map(min, ...))``
    would be slower here than the loop (a ``min`` call costs more than the comparison).
    """
    correct = [0] * max_order
    for n in range(1, min(max_order, len(hyp)) + 1):
        if n > 1 and not correct[n - 2]:
            break  # an n-gram can only match if its (n-1)-gram prefix does
        hyp_counts = _order_counts(hyp, n)
        if len(hyp_counts) == len(hyp) - n + 1:
            # every hypothesis n-gram occurs once, so each one in any reference is one match
            found = set().union(*(_order_grams(ref, n) for ref in refs))
            correct[n - 1] = len(hyp_counts.keys() & found)
            continue
        if len(refs) == 1:
            limit_get = _order_counts(refs[0], n).get
        else:
            limit: dict[Hashable, int] = {}
            for ref in refs:
                ref_counts = _order_counts(ref, n)
                for gram in hyp_counts.keys() & ref_counts.keys():
                    count = ref_counts[gram]
                    if count > limit.get(gram, 0):
                        limit[gram] = count
            limit_get = limit.get
        matches = 0
        for gram, count in hyp_counts.items():
            ref_count = limit_get(gram)
            if ref_count:
                matches += count if count < ref_count else ref_count
        correct[n - 1] = matches
    return correct


@dataclass(frozen=True, slots=True)
class BleuResult:
    score: float  # 0-1 (sacrebleu's score / 100)
    precisions: tuple[float, ...]  # 0-1, after smoothing
    bp: float
    sys_len: int
    ref_len: int


def sentence_bleu(
    hypothesis: str,
    references: Sequence[str],
    *,
    tokenize: Literal["13a", "zh"] = "13a",
    lowercase: bool = False,
    max_order: int = 4,
) -> BleuResult:
    """sacrebleu's sentence BLEU with exp smoothing and effective order, on a 0-1 scale."""
    tok = _TOKENIZERS[tokenize]

    def prep(text: str) -> list[str]:
        return tok((text.lower() if lowercase else text).rstrip())

    ref_tokens = [prep(ref) for ref in references]
    ref_lens = [len(tokens) for tokens in ref_tokens]
    hyp = prep(hypothesis)
    sys_len = len(hyp)
    # closest reference length; on a tie the shorter one (sacrebleu _get_closest_ref_len)
    ref_len = min(ref_lens, key=lambda r: (abs(sys_len - r), r)) if ref_lens else 0
    # sacrebleu counts every n-gram position: len - n + 1 of them, clipped against the references
    total = [max(0, sys_len - n) for n in range(max_order)]
    correct = _clipped_matches(hyp, ref_tokens, max_order) if ref_tokens else [0] * max_order

    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    precisions = [0.0] * max_order
    if not any(correct):
        return BleuResult(0.0, tuple(precisions), bp, sys_len, ref_len)
    # Same arithmetic as sacrebleu (percentages, floored log) so the result is bit-for-bit comparable.
    smooth = 1.0
    eff_order = max_order
    for n in range(1, max_order + 1):
        if total[n - 1] == 0:
            break
        eff_order = n
        if correct[n - 1] == 0:
            smooth *= 2
            precisions[n - 1] = 100.0 / (smooth * total[n - 1])
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    log_sum = sum(math.log(p) if p > 0 else -9999999999 for p in precisions[:eff_order])
    score = bp * math.exp(log_sum / eff_order)
    return BleuResult(score / 100.0, tuple(p / 100.0 for p in precisions), bp, sys_len, ref_len)


class BleuParams(Params):
    tokenize: Literal["13a", "zh", "auto"] = Field(
        default="auto",
        description="sacrebleu tokeniser; auto = zh when output or a target has CJK text, else 13a",
    )
    lowercase: bool = Field(default=False, description="lower-case before tokenising (sacrebleu -lc)")
    max_order: int = Field(default=4, ge=1, le=8, description="longest n-gram")
    threshold: float = Field(default=0.3, ge=0.0, le=1.0, description="pass at or above this BLEU (0-1)")


@register
class Bleu(Evaluator):
    """Sentence BLEU (0-1) of ``output`` against all targets together (multi-reference), as sacrebleu."""

    name = "bleu"
    summary = "sentence BLEU equal to sacrebleu's (13a/zh, exp smoothing, multi-reference)"
    Params = BleuParams
    params: BleuParams

    def evaluate(self, event: RequestEvent) -> Score:
        targets = self.targets(event)
        tokenize = self.params.tokenize
        if tokenize == "auto":
            tokenize = "zh" if has_cjk(event.output) or any(has_cjk(t) for t in targets) else "13a"
        result = sentence_bleu(
            event.output,
            targets,
            tokenize=tokenize,
            lowercase=self.params.lowercase,
            max_order=self.params.max_order,
        )
        # exp(log(100)) is 100.00000000000004: keep the contract's [0, 1] (sentence_bleu stays sacrebleu-equal)
        value = min(1.0, result.score)
        return Score(
            value,
            value >= self.params.threshold,
            f"BLEU {result.score * 100:.2f} (tokenize {tokenize}, BP {result.bp:.3f})",
            {
                "tokenize": tokenize,
                "precisions": list(result.precisions),
                "bp": result.bp,
                "sys_len": result.sys_len,
                "ref_len": result.ref_len,
            },
        )


def bleu_simple(
    references: Sequence[str],
    candidate: str,
    *,
    max_order: int = 4,
    tokenizer: Callable[[str], list[str]] | None = None,
) -> float:
    """The agent-metrics spec's ``calculate_bleu``: the 1..``max_order``-gram matches of the candidate
    (clipped by the reference counts) over all candidate n-grams, taking the reference with the most matches.
    No brevity penalty, no geometric mean. Empty candidate or no references: 0.0 (as the spec)."""
    split = tokenizer or (lambda text: text.lower().split())
    if not candidate or not references:
        return 0.0
    # The spec joins n-grams with spaces; tokens hold no whitespace, so tuples compare the same way.
    tokens = split(candidate)
    total = sum(max(0, len(tokens) - n) for n in range(max_order))  # every n-gram position, n = 1..max_order
    if total == 0:
        return 0.0
    best = 0
    for ref in references:
        if not ref:
            continue
        best = max(best, sum(_clipped_matches(tokens, [split(ref)], max_order)))
    return best / total


class BleuSimpleParams(Params):
    max_order: int = Field(default=4, ge=1, le=8, description="n-grams of order 1..max_order (default: 4)")
    tokenize: Literal["whitespace", "cjk"] = Field(
        default="whitespace",
        description="whitespace = lower().split() as in the agent-metrics spec; cjk = one token per CJK character, words otherwise",
    )
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="pass at or above this precision")


@register
class BleuSimple(Evaluator):
    """The agent-metrics spec's simplified BLEU: clipped n-gram precision (n = 1..4) against the best reference."""

    name = "bleu_simple"
    summary = "plain clipped n-gram precision (no brevity penalty), best reference"
    Params = BleuSimpleParams
    params: BleuSimpleParams
    _TOKENIZE: ClassVar[dict[str, Callable[[str], list[str]] | None]] = {
        "whitespace": None,
        "cjk": cjk_tokens,
    }

    def evaluate(self, event: RequestEvent) -> Score:
        value = bleu_simple(
            self.targets(event),
            event.output,
            max_order=self.params.max_order,
            tokenizer=self._TOKENIZE[self.params.tokenize],
        )
        return Score(value, value >= self.params.threshold, f"clipped n-gram precision {value:.3f}")
