"""The inbound pipeline's bookkeeping of delivery keys: claim, commit, release, ack.

A delivery's key is judged in two places (``inbound.py``, "Dedupe"): the local
``DedupeSet`` at submit, which sees what this pipeline holds, and the dedupe store right
before the handler, which sees what other replicas and earlier runs handled. Both must
hear every outcome at the same moment (committed and acked, or released), or a replay
slips through the one that was not told. So the pipeline decides *when* a delivery is
done with, and `DeliveryKeys` is the one place that tells both and sends the ack.
"""

from __future__ import annotations

import logging

from ..._core.dedupe import Claim, DedupeSet
from ..._core.dedupe_store import DedupeSession
from ..._core.delivery import Delivery
from ..._core.stats import RelayStats
from ..._core.telemetry import Telemetry
from .acks import AckSender

__all__ = ["DeliveryKeys"]

logger = logging.getLogger("trio_relay")


class DeliveryKeys:
    """Claims, commits and releases delivery keys in the local set and the store, and
    acks through ``acks`` (the pipeline's; see `.acks` for the path an ack takes).

    The store session is attached once the pipeline has opened it (`attach`);
    before that only the local set is told, as nothing has reached the store yet.
    """

    # no __dict__: one per relay
    __slots__ = ("_acks", "_dedupe", "_stats", "_store", "_telemetry")

    def __init__(
        self,
        dedupe: DedupeSet,
        stats: RelayStats,
        acks: AckSender,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._dedupe = dedupe
        self._stats = stats
        self._telemetry = telemetry
        self._acks = acks
        self._store: DedupeSession | None = None

    async def attach(self, store: DedupeSession) -> None:
        """Use ``store`` from now on, and load the keys it handled recently: until then a
        replay of a message handled before a restart would look new."""
        self._store = store
        self._dedupe.load(await store.load_recent())

    def claim(self, delivery: Delivery) -> bool:
        """The local check at submit: true when ``delivery`` is new here (or has no key).
        A copy of a handled one is dropped and acked; a copy of one queued or running is
        dropped without ack (the one in flight acks)."""
        if delivery.key is None:
            return True
        claim = self._dedupe.claim(delivery.key)
        if claim is Claim.NEW:
            return True
        self._stats.replays_dropped += 1
        if self._telemetry is not None:
            self._telemetry.duplicate()
        if claim is Claim.DONE:
            logger.debug("inbound: dropped replay of handled %s", delivery.label,
                         extra={"buffer_id": delivery.buffer_id})
            self.ack(delivery.buffer_id, delivery.key)
        else:  # in progress: the copy in flight will ack
            logger.debug("inbound: dropped copy of in-flight %s", delivery.label,
                         extra={"buffer_id": delivery.buffer_id})
        return False

    def unclaim(self, delivery: Delivery) -> None:
        """Forget the local claim of a delivery the pipeline did not take (queue full):
        the store never saw it, so only the local set is told."""
        if delivery.key is not None:
            self._dedupe.release(delivery.key)

    async def store_allows(self, delivery: Delivery) -> bool:
        """The store's check right before the handler: true when it may run. A delivery
        handled elsewhere is dropped and acked; one another replica holds is dropped (that
        replica acks)."""
        if delivery.key is None:
            return True
        assert self._store is not None
        try:
            claim = await self._store.claim(delivery.key)
        except Exception:  # a store must fail open itself; a bug in one must not stop us
            self._stats.dedupe_store_fail_open += 1
            logger.exception("inbound: dedupe store failed to claim %s; running it",
                             delivery.label, extra={"buffer_id": delivery.buffer_id})
            return True
        if claim is Claim.NEW:
            return True
        self._stats.replays_dropped += 1
        if self._telemetry is not None:
            self._telemetry.duplicate()
        if claim is Claim.DONE:  # handled elsewhere (another replica, an earlier run)
            logger.debug("inbound: %s handled elsewhere; dropped and acked", delivery.label,
                         extra={"buffer_id": delivery.buffer_id})
            self.finish(delivery, commit_store=False)
        else:  # another replica holds it: it acks
            logger.debug("inbound: %s is being handled elsewhere; dropped", delivery.label,
                         extra={"buffer_id": delivery.buffer_id})
            self._dedupe.release(delivery.key)
        return False

    def release(self, delivery: Delivery) -> None:
        """Not handled (failed, cancelled, abandoned): a redelivery runs it again."""
        if delivery.key is not None:
            self._dedupe.release(delivery.key)
            if self._store is not None:
                self._store.release(delivery.key)

    def finish(self, delivery: Delivery, *, commit_store: bool = True) -> None:
        """Commit (pinned until the ack is written), then ack."""
        if delivery.key is not None:
            self._dedupe.commit(delivery.key, pinned=delivery.buffer_id is not None)
            if commit_store and self._store is not None:
                self._store.commit(delivery.key)
        self.ack(delivery.buffer_id, delivery.key)

    def ack(self, buffer_id: str | None, key: str | None) -> None:
        """Queue the ack; ``key`` (committed, pinned) is unpinned once it is written."""
        if buffer_id is None:
            return
        dedupe = self._dedupe

        def written() -> None:
            if key is not None:
                dedupe.unpin(key)

        try:
            sent = self._acks.send_ack(buffer_id, written)
        except Exception:
            logger.exception("inbound: send_ack raised for bufferId=%s", buffer_id,
                             extra={"buffer_id": buffer_id})
            return
        if not sent:
            # Not lost: the connector replays it, and dedupe drops and acks it then.
            logger.debug("inbound: no connection to ack bufferId=%s", buffer_id,
                         extra={"buffer_id": buffer_id})
