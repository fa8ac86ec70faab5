"""The agent-metrics spec's BLEU and ROUGE-L as the spec prints them (indicators.py), used as references in tests."""

from __future__ import annotations

from collections import Counter


def seed_bleu(reference: list[str], candidate: str, n: int = 4) -> float:
    if not candidate or not reference:
        return 0.0

    def get_ngrams(text: str, n: int) -> list[str]:
        words = text.lower().split()
        if len(words) == 0:
            return []
        return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]

    candidate_ngrams: list[str] = []
    for i in range(1, n + 1):
        candidate_ngrams.extend(get_ngrams(candidate, i))
    if len(candidate_ngrams) == 0:
        return 0.0
    max_matches = 0
    for ref in reference:
        if not ref:
            continue
        ref_ngrams: list[str] = []
        for i in range(1, n + 1):
            ref_ngrams.extend(get_ngrams(ref, i))
        ref_counter = Counter(ref_ngrams)
        cand_counter = Counter(candidate_ngrams)
        ref_matches = 0
        for ngram in cand_counter:
            if ngram in ref_counter:
                ref_matches += min(cand_counter[ngram], ref_counter[ngram])
        max_matches = max(max_matches, ref_matches)
    return max_matches / len(candidate_ngrams) if len(candidate_ngrams) > 0 else 0.0


def seed_lcs(text1: str, text2: str) -> int:
    words1 = text1.lower().split()
    words2 = text2.lower().split()
    m, n = len(words1), len(words2)
    if m == 0 or n == 0:
        return 0
    dp = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if words1[i - 1] == words2[j - 1]:
                dp[i][j] = dp[i - 1][j - 1] + 1
            else:
                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
    return dp[m][n]


def seed_rouge_l(reference: list[str], candidate: str) -> dict[str, float]:
    zero = {"score": 0.0, "rouge_l": 0.0, "rouge_l_precision": 0.0, "rouge_l_recall": 0.0}
    if not candidate or not reference:
        return zero
    candidate_len = len(candidate.split())
    if candidate_len == 0:
        return zero
    lcs_scores = []
    for ref in reference:
        if not ref:
            continue
        ref_len = len(ref.split())
        if ref_len == 0:
            continue
        lcs_len = seed_lcs(ref, candidate)
        lcs_scores.append({"lcs": lcs_len, "precision": lcs_len / candidate_len, "recall": lcs_len / ref_len})
    if not lcs_scores:
        return zero
    best = max(lcs_scores, key=lambda x: x["recall"])
    p, r = best["precision"], best["recall"]
    f1 = 2 * p * r / (p + r) if (p + r) > 0 else 0.0
    return {"score": f1, "rouge_l": f1, "rouge_l_precision": p, "rouge_l_recall": r}
