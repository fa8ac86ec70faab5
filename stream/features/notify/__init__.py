"""Alert notifications: Slack, PagerDuty, Opsgenie, signed webhooks and Alertmanager (docs/notify.md).

Built only when the suite file has a ``notify:`` list. The pieces:

- :mod:`._config`: the channels of the suite file and their checks (:func:`notify_issues`);
- :mod:`._payloads`: each provider's documented request for an alert (pure functions);
- :mod:`._marks`: what each channel took, in Redis (no page twice; resolves where the trigger went);
- :mod:`._deliver`: one channel's deliveries, rate limit and retries;
- :mod:`._service`: the :class:`Notifier`, a consumer of the alerts topic with its own group;
- :mod:`._program`: running it in the worker, as ``streameval notify``, and ``streameval notify test``;
- :mod:`._resolves`: the window closer's step that publishes the resolves (streameval.feature.WindowStep).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._config import KINDS, ChannelConfig, ChannelKind, notify_issues
from ._payloads import SIGNATURE_HEADER, HttpRequest, Links, build_request, incident_key, sign
from ._resolves import ResolveStep

if TYPE_CHECKING:  # imported when first used: loading a suite file must not load the Kafka and HTTP clients
    from ._deliver import ChannelWorker, Outcome
    from ._marks import Marks
    from ._service import Notifier

_LAZY = {"ChannelWorker": "._deliver", "Outcome": "._deliver", "Marks": "._marks", "Notifier": "._service"}

__all__ = [
    "KINDS",
    "SIGNATURE_HEADER",
    "ChannelConfig",
    "ChannelKind",
    "ChannelWorker",
    "HttpRequest",
    "Links",
    "Marks",
    "Notifier",
    "Outcome",
    "ResolveStep",
    "build_request",
    "incident_key",
    "notify_issues",
    "sign",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
