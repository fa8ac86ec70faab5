"""Alert notifications: Slack, PagerDuty, Opsgenie, signed webhooks and Alertmanager (docs/notify.md).

Built only when the suite file has a ``notify:`` list. The pieces:

- :mod:`._config`: the channels of the suite file and their checks (:func:`notify_issues`);
- :mod:`._payloads`: each provider's documented request for an alert (pure functions);
- :mod:`._marks`: what each channel took, in Redis (no page twice; resolves where the trigger went);
- :mod:`._deliver`: one channel's deliveries, rate limit and retries;
- :mod:`._service`: the :class:`Notifier`, a consumer of the alerts topic with its own group;
- :mod:`._program`: running it in the worker, as ``streameval notify``, and ``streameval notify test``.
"""

from __future__ import annotations

from ._config import KINDS, ChannelConfig, ChannelKind, notify_issues
from ._deliver import ChannelWorker, Outcome
from ._marks import Marks
from ._payloads import SIGNATURE_HEADER, HttpRequest, Links, build_request, incident_key, sign
from ._service import Notifier

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
    "build_request",
    "incident_key",
    "notify_issues",
    "sign",
]
