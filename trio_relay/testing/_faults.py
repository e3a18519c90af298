"""The reference connector's controllable behaviour: who may connect, how results flow.

`UpgradePolicy` decides each upgrade (path, bearer token, revocations, injected
refusals); `ResultPolicy` decides what happens to each ``outbound_result``
(sent now, delayed, withheld until released, dropped, or lost for chosen actions).
Both are plain state that the connector's public fault methods flip; neither does I/O
itself.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import trio

from .._core.frames import OutboundResult
from .._core.token import verify_token
from ._breaks import NO_BREAKS, ContractBreaks
from ._session import ANONYMOUS, Admission, Session

RELAY_PATH = "/relay"
EXPIRED = "expired"
UNAUTHORIZED = "unauthorized"


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if there is one."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


class UpgradePolicy:
    def __init__(
        self,
        secrets: dict[str, str] | None,
        clock: Callable[[], float],
        breaks: ContractBreaks = NO_BREAKS,
    ) -> None:
        self.secrets = secrets
        self.clock = clock
        self.breaks = breaks
        self.revoked: set[str] = set()
        self._refusals: collections.deque[tuple[int, str]] = collections.deque()

    def refuse_next(self, count: int, code: int, reason: str) -> None:
        self._refusals.extend([(code, reason)] * count)

    def admit(self, path: str, headers: list[tuple[bytes, bytes]]) -> Admission:
        if urlsplit(path).path.rstrip("/") != RELAY_PATH:
            return Admission(http_status=404)
        if self._refusals:
            # Injected refusals come first: they model a connector that is not ready for
            # this gateway yet (a provisioning race), whatever its credentials.
            return Admission(refuse=self._refusals.popleft())
        token = bearer_token(headers)
        refusal_code = self.breaks.auth_close_code
        if self.secrets is None or (token is None and not self.breaks.require_token):
            gateway_id = ANONYMOUS
        else:
            check = verify_token(token or "", self.secrets, now=self.clock())
            if not check.ok:
                expired = check.reason == EXPIRED
                reason = self.breaks.expired_reason if expired else UNAUTHORIZED
                return Admission(
                    gateway_id=check.gateway_id or ANONYMOUS, refuse=(refusal_code, reason)
                )
            gateway_id = check.gateway_id or ANONYMOUS
        if gateway_id in self.revoked:
            return Admission(gateway_id=gateway_id, refuse=(refusal_code, UNAUTHORIZED))
        return Admission(gateway_id=gateway_id)


ActionMatch = Callable[[Mapping[str, Any]], bool]
"""Chooses actions by their ``action`` object (e.g. ``lambda a: a.get("final") is True``)."""


class ResultPolicy:
    def __init__(self, breaks: ContractBreaks = NO_BREAKS) -> None:
        self.breaks = breaks
        self.delay = 0.0
        self.withholding = False
        self.dropping = False
        self.held: list[tuple[Session, OutboundResult]] = []
        self.dropped = 0
        """Results never sent: dropped on purpose, or released onto a closed session."""
        self.losing: list[list[Any]] = []
        """[count left, match] pairs: the results of the next matching actions are lost."""

    def lose(self, count: int, match: ActionMatch) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        self.losing.append([count, match])

    def _lost(self, action: Mapping[str, Any] | None) -> bool:
        if action is None:
            return False
        for entry in self.losing:
            if entry[1](action):
                entry[0] -= 1
                if entry[0] == 0:
                    self.losing.remove(entry)
                return True
        return False

    def route(
        self, session: Session, reply: OutboundResult, action: Mapping[str, Any] | None = None
    ) -> None:
        if not self.breaks.echo_request_ids:
            reply = OutboundResult(reply.request_id[::-1] + "0", reply.result)
        if self.dropping or (self.losing and self._lost(action)):
            self.dropped += 1
        elif self.withholding:
            self.held.append((session, reply))
        elif self.delay > 0:
            session.start_soon(_send_later, session, reply, self.delay)
        else:
            session.send(reply)

    def release(self) -> None:
        self.withholding = False
        held, self.held = self.held, []
        for session, reply in held:
            if session.is_open:
                session.send(reply)
            else:
                # The session that asked is gone; a real connector could not answer it
                # either, and the gateway has already given the request an outcome.
                self.dropped += 1


async def _send_later(session: Session, reply: OutboundResult, delay: float) -> None:
    await trio.sleep(delay)
    session.send(reply)
