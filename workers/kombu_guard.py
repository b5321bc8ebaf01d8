"""A guard around kombu's Redis transport, so that a worker survives a broker restart.

When the connection to Redis breaks, Celery's consumer collects the connection, which detaches
kombu's transport from it (``transport.client = None``), and then closes the task consumer's
channel. Closing a channel puts its unacknowledged messages back in their queue
(``QoS.restore_unacked``), which builds a new Redis client from ``transport.client.hostname``: when
the channel was not already closed during the collect (its close raised, or it was not among the
transport's channels), that is ``None.hostname``, an AttributeError that Celery does not treat as a
connection error, and the worker exits ("Unrecoverable error"). Seen with kombu 5.x and Celery 5.x;
reproduced in tests/workers/test_worker_failures.py.

With no connection left there is nothing to restore them through, and nothing is lost by not
trying: the messages stay in Redis's unacknowledged set, which returns them after the visibility
timeout, and the requests they stood for are in the database, where a dispatcher publishes them
again once their lease runs out (``workers.dispatcher``).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def guard_restore_unacked() -> None:
    """Make kombu's Redis ``QoS.restore_unacked`` skip restoring when its connection is gone
    (idempotent; applied when a Celery app is made)."""
    from kombu.transport import redis as transport

    original = transport.QoS.restore_unacked
    if getattr(original, "slaplan_guarded", False):
        return

    def restore_unacked(self, client=None):
        connection = self.channel.connection
        if client is None and (connection is None or connection.client is None):
            log.warning("the broker connection is closed: %d unacknowledged message(s) stay with Redis, which "
                        "returns them after the visibility timeout", len(self._delivered))
            self._delivered.clear()
            return None
        return original(self, client)

    restore_unacked.slaplan_guarded = True
    restore_unacked.__wrapped__ = original
    transport.QoS.restore_unacked = restore_unacked
