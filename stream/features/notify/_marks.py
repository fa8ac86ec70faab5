"""What each channel already took, in Redis: no page twice, and a resolve only where the trigger went.

``notify:sent:{channel}:{status}:{alert id}`` is set once a channel accepted a notification (for
``dedupe_ttl_s``): a redelivered or re-read alert is not sent to it again. ``notify:open:{channel}:
{incident}`` is set when a channel accepted an incident's trigger and removed when it accepted the
resolve: a resolve goes only to channels that got the trigger. Keys under the store's prefix
(:class:`streameval.keyspace.Keys`), one command each.
"""

from __future__ import annotations

from ...keyspace import Client, Keys, guard
from ...models import Alert
from ._payloads import incident_key

__all__ = ["DEDUPE_TTL_S", "OPEN_TTL_S", "Marks"]

#: how long a channel's "taken" mark lasts: redeliveries and restarts within it send nothing twice
DEDUPE_TTL_S = 7 * 86400
#: how long an incident stays open for a channel without its resolve (a pair that stops receiving events)
OPEN_TTL_S = 30 * 86400


class Marks:
    """The channels' marks on ``client`` under ``keys``."""

    def __init__(self, client: Client, keys: Keys, *, dedupe_ttl_s: int = DEDUPE_TTL_S) -> None:
        self.client = client
        self.keys = keys
        self.dedupe_ttl_s = dedupe_ttl_s

    async def skip(self, channel: str, alert: Alert) -> str | None:
        """Why ``channel`` should not be sent ``alert`` (None: send it)."""
        if await guard(self.client.exists(self.keys.notify_sent(channel, alert.id, alert.status))):
            return "this channel already accepted it"
        if alert.status == "resolved" and not await guard(
            self.client.exists(self.keys.notify_open(channel, incident_key(alert)))
        ):
            return "this channel did not get the trigger"
        return None

    async def taken(self, channel: str, alert: Alert) -> None:
        """``channel`` accepted ``alert``."""
        await guard(
            self.client.set(
                self.keys.notify_sent(channel, alert.id, alert.status), b"1", ex=self.dedupe_ttl_s
            )
        )
        incident = self.keys.notify_open(channel, incident_key(alert))
        if alert.status == "firing":
            await guard(self.client.set(incident, alert.id.encode(), ex=OPEN_TTL_S))
        else:
            await guard(self.client.delete(incident))
