"""The soak's actors: requesters and bursts on the gateway's side, the outbound handler
and the delivery producer on the connector's side, and the relay's message handler.

Each is a function of the shared :class:`.state.Soak`; the run starts them in its
nurseries (:mod:`.run`).
"""

from __future__ import annotations

import random
from typing import Any

import trio

import trio_relay
from trio_relay import MessageEvent, Outcome
from trio_relay._core.frames import Outbound
from trio_relay._core.outcome import GATEWAY_CODES
from trio_relay.testing import ReferenceConnector, Session

from . import ledger
from .settings import BURST_BYTES, CHATS, DEADLINE_SLACK, GATEWAY_ID, PLATFORM
from .state import Soak

__all__ = [
    "answer",
    "burster",
    "handle_message",
    "producer",
    "requester",
    "spawn_burst",
]

JsonObject = dict[str, Any]


# --- the connector's side ------------------------------------------------------------


async def answer(soak: Soak, session: Session, frame: Outbound) -> JsonObject | None:
    """The connector's outbound handler: mark the nonce received, sometimes take a
    while, mark it answered, answer (now and then with a refusal)."""
    nonce = frame.action.get("nonce")
    if not isinstance(nonce, int):
        return {"success": False, "error": "soak: no nonce"}
    soak.flags.set(nonce, ledger.RECEIVED)
    soak.last_request_id = frame.request_id
    roll = soak.rng.random()
    if roll < 0.05:
        soak.working_on.add(frame.request_id)
        try:
            await trio.sleep(soak.rng.uniform(0.0, 0.4))  # a slow platform call
        finally:
            soak.working_on.discard(frame.request_id)
    soak.flags.set(nonce, ledger.ANSWERED)
    if roll > 0.98:
        return {"success": False, "code": "egress_declined", "nonce": nonce}
    if soak.flags.has(nonce, ledger.CARRIED):
        soak.duplicates += 1  # the chat shows this message twice
    soak.flags.set(nonce, ledger.CARRIED)
    return {"success": True, "message_id": f"m-{nonce}"}


async def producer(soak: Soak, connector: ReferenceConnector, until: float) -> None:
    """Buffer user messages on the connector: delivered at once if a session is up,
    replayed on every handshake until acknowledged."""
    while trio.current_time() < until:
        index = len(soak.handled)
        soak.handled.append(0)
        soak.attempts.append(0)
        event = {
            "text": f"soak message {index}",
            "message_type": "text",
            "message_id": f"d-{index}",
            "source": {"platform": PLATFORM, "chat_id": f"c{index % CHATS}", "user_id": "u1"},
        }
        connector.buffer_inbound(event, gateway_id=GATEWAY_ID)
        soak.report.deliveries += 1
        await trio.sleep(soak.rng.uniform(0.0, 2.0 / soak.delivery_rate))


# --- the gateway's side --------------------------------------------------------------


async def handle_message(soak: Soak, event: MessageEvent) -> None:
    """The relay's ``on_message``: count the run; fail a few first attempts on purpose
    (the redelivery must still run it exactly once)."""
    index = int(str(event.message_id).removeprefix("d-"))
    soak.attempts[index] = min(soak.attempts[index] + 1, 255)
    await trio.sleep(soak.rng.uniform(0.0, 0.01))
    if soak.attempts[index] == 1 and soak.rng.random() < 0.03:
        soak.report.handler_failures_injected += 1
        raise RuntimeError(f"soak: first attempt of d-{index} fails on purpose")
    soak.handled[index] = min(soak.handled[index] + 1, 255)


def _record(soak: Soak, nonce: int, outcome: Outcome, elapsed: float, timeout: float) -> None:
    flags = soak.flags
    if flags.has(nonce, ledger.FINISHED):
        soak.doubles += 1
    flags.set(nonce, ledger.FINISHED)
    overshoot = elapsed - timeout
    soak.report.max_overshoot = max(soak.report.max_overshoot, overshoot)
    if overshoot > DEADLINE_SLACK:
        soak.late += 1
    forged = outcome.result.get("forged")
    if outcome.success and isinstance(forged, str):
        # The hostile actor's answer, taken: judged by the invariants, not a success.
        early = forged == "early" and not flags.has(nonce, ledger.ATTEMPTED)
        soak.forged_taken["early" if early else "sent" if forged == "early" else forged] += 1
        kind = f"forged:{forged}"
    elif outcome.success:
        flags.set(nonce, ledger.SUCCESS)
        kind = "success"
        if outcome.result.get("message_id") != f"m-{nonce}":
            soak.mismatched += 1
    elif outcome.code in GATEWAY_CODES:
        if outcome.ambiguous:
            flags.set(nonce, ledger.AMBIGUOUS)
            kind = f"ambiguous:{outcome.code}"
            if elapsed < timeout - DEADLINE_SLACK:
                soak.ambiguous_early += 1
        else:
            flags.set(nonce, ledger.DEFINITE)
            kind = f"definite:{outcome.code}"
    elif outcome.code == "egress_declined" and not outcome.result:
        # The chat is latched after an earlier decline: answered by the relay with no
        # frame (no result), so it is a definite failure the connector must not see.
        flags.set(nonce, ledger.DEFINITE)
        kind = "definite:latched"
    else:
        kind = "declined" if outcome.code == "egress_declined" else f"other:{outcome.code}"
        if outcome.result.get("nonce") != nonce:
            soak.mismatched += 1
    soak.report.outcomes[kind] += 1
    if outcome.attempts > 1:
        soak.report.resent += 1


async def _one_request(
    soak: Soak, relay: trio_relay.Relay, rng: random.Random, size: int, wait: bool
) -> None:
    nonce = soak.flags.new()
    # The nonce first: the write tap reads it from the first bytes of the frame.
    action = {"nonce": nonce, "op": "send", "chat_id": f"c{nonce % CHATS}", "content": "x" * size}
    timeout = rng.uniform(*soak.timeouts)
    start = trio.current_time()
    outcome = await relay.request(action, timeout=timeout, wait_connected=wait)
    _record(soak, nonce, outcome, trio.current_time() - start, timeout)


async def requester(soak: Soak, relay: trio_relay.Relay, seed: int) -> None:
    """One request after another, random sizes and timeouts (some waiting for a
    connection), a short random pause between them."""
    rng = random.Random(seed)
    while not soak.stop_requests:
        size = rng.choice((8, 8, 8, 200, 2_000, 20_000))
        await _one_request(soak, relay, rng, size, rng.random() < 0.15)
        await trio.sleep(rng.uniform(0.0, 0.02))


async def burster(soak: Soak, relay: trio_relay.Relay, until: float) -> None:
    while True:
        await trio.sleep(soak.rng.uniform(1.0, 6.0))
        if trio.current_time() >= until:
            return
        spawn_burst(soak, relay)


def spawn_burst(soak: Soak, relay: trio_relay.Relay) -> None:
    assert soak.requests is not None
    soak.requests.start_soon(_burst, soak, relay)


async def _burst(soak: Soak, relay: trio_relay.Relay) -> None:
    """Hundreds of large requests at once: megabytes queued for the writer, more than
    the kernel buffers hold while the connector is silent, so the writer is blocked
    mid-batch while requests time out and connections die."""
    if soak.stop_requests:
        return
    soak.report.bursts += 1
    rng = random.Random(soak.rng.getrandbits(32))
    async with trio.open_nursery() as nursery:
        for _ in range(rng.randint(100, 400)):
            nursery.start_soon(_one_request, soak, relay, rng, BURST_BYTES, False)
