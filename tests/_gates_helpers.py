"""The gate suite shared by the gate tests (tests/core/test_gates.py, tests/integration/test_gates_stream.py).
Not a test module."""

from __future__ import annotations

from typing import Any

# "no card number": passes when the output has no 16-digit card number (a negative lookahead)
NO_CARD = r"^(?!.*\b\d{4}[ -]?\d{4}[ -]?\d{4}[ -]?\d{4}\b)"
CARD = "Your refund is on its way to card 4111 1111 1111 1111, order ORD-123456."
CLEAN = "Your refund is on its way, order ORD-123456."


def suite(grading: str = "levels", gate: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "suites": [
            {
                "name": "support",
                "default": True,
                "threshold": 0.6,
                "grading": grading,
                "evaluators": [
                    {"evaluator": "contains", "params": {"value": "ORD-123456"}, "weight": 3},
                    {
                        "evaluator": "regex",
                        "name": "no_card",
                        "params": {"pattern": NO_CARD, "flags": "s"},
                        "weight": 1,
                        "gate": gate,
                        **extra,
                    },
                ],
            }
        ]
    }
