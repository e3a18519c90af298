"""The conformance check: a live connector, clause by clause of docs/protocol.md.

`check_connector` plays a gateway that does everything by the book and watches the
connector's side of each exchange. It runs as one script over a few connections:

1. a connection with a fresh token: the hellos and their descriptors, an unknown op
   and its result, a ping;
2. three upgrades that must be refused (a token signed with another secret, no token,
   an expired token), each closed at once;
3. with a chat and someone to write in it, the delivery round: a message arrives
   buffered and is left unacked; the next connection must replay it, and is told to go
   idle; a second message written while idle must not come live, and the third
   connection must replay it and not the first, acked one;
4. with a chat, each advertised op once, the seal of a live card twice, an
   idempotency key three times, then the message it sent deleted.

Waits for what must come are bounded by ``timeout``; what must *not* come is watched
for ``settle`` seconds after the last thing that did.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._core.config import Identity
from ..._core.conformance import CLAUSES, Report, Status, Verdict, clause
from ..._core.contract_shapes import descriptor_problems, json_kind, result_problems
from ..._core.descriptor import Descriptor
from ..._core.endpoint import Endpoint
from ..._core.frames import (
    DescriptorFrame,
    Frame,
    FrameError,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Outbound,
    OutboundResult,
)
from ..._core.token import DEFAULT_TOKEN_TTL, mint_token
from ..._core.url import normalize_url
from .link import DialRefused, ProbeLink, dial

__all__ = ["WriteMessage", "check_connector"]

WriteMessage = Callable[[str, str], Awaitable[bool]]
"""``async (chat_id, text) -> bool``: have someone write ``text`` in ``chat_id`` (a
person asked at a terminal, a test's connector); true once it is written, false when
no one can."""

UNKNOWN_OP = "conformance_probe"
"""An op protocol v1 does not have: every connector must still answer it."""

_ROUTING_KEYS = ("scope_id", "user_id", "profile")


@dataclass(frozen=True, slots=True)
class _Refusal:
    """How the connector took an upgrade it must refuse."""

    accepted: bool = False
    close: tuple[int, str] | None = None
    frames_before_close: int = 0
    http_status: int | None = None
    other: str | None = None
    """A refusal without a close frame: reset, EOF, silence."""

    def describe(self) -> str:
        if self.accepted:
            return "accepted: its hello was answered with a descriptor"
        if self.close is not None:
            code, reason = self.close
            before = (
                f" after {self.frames_before_close} frame(s)" if self.frames_before_close else ""
            )
            return f"closed with {code} {reason!r}{before}"
        if self.http_status is not None:
            return f"refused the upgrade with HTTP {self.http_status}"
        return self.other or "nothing"


@dataclass(slots=True)
class _Run:
    url: str
    gateway_id: str
    secret: str
    identities: Sequence[Identity]
    chat: str | None
    write_message: WriteMessage | None
    timeout: float
    settle: float
    clock: Callable[[], float]
    selected: Collection[str]
    report: Report
    answered: dict[str, int] = field(default_factory=dict)
    strays: list[str] = field(default_factory=list)
    """Results no request of ours asked for, in words."""
    descriptors: dict[str, Descriptor] = field(default_factory=dict)
    routing: dict[str, Any] = field(default_factory=dict)
    chat_platform: str | None = None

    # --- plumbing ---------------------------------------------------------------------

    def wanted(self, *clause_ids: str) -> bool:
        return any(c in self.selected for c in clause_ids)

    def judge(self, verdict: Verdict) -> None:
        if verdict.clause.id in self.selected:
            self.report.add(verdict)

    def blocked(self, clause_id: str) -> bool:
        """Skip ``clause_id`` (and say why) when a clause it needs did not pass."""
        blocker = self.report.blocker(clause(clause_id).requires)
        if blocker is None:
            return False
        how = "failed" if blocker.status is Status.FAILED else f"was skipped: {blocker.detail}"
        self.judge(Verdict.skipped(clause_id, f"it needs {blocker.clause.id}, which {how}"))
        return True

    def _observe(self, link: ProbeLink, frame: Frame) -> None:
        if not isinstance(frame, OutboundResult):
            return
        request_id = frame.request_id
        if request_id not in link.sent_ids:
            self.strays.append(f"a result for requestId {request_id!r}, which was never sent")
            return
        self.answered[request_id] = self.answered.get(request_id, 0) + 1
        if self.answered[request_id] == 2:
            self.strays.append(f"a second result for requestId {request_id!r}")

    async def dial(self, bearer: str | None) -> ProbeLink | DialRefused:
        return await dial(self.url, bearer, timeout=self.timeout, on_frame=self._observe)

    def fresh_token(self) -> str:
        return mint_token(self.gateway_id, self.secret, ttl=DEFAULT_TOKEN_TTL, now=self.clock())

    async def handshake(self) -> tuple[ProbeLink | None, str]:
        """A fresh connection with its hellos answered, or ``None`` and what happened."""
        link = await self.dial(self.fresh_token())
        if isinstance(link, DialRefused):
            return None, link.cause
        await link.send(*(Hello(i.platform, i.bot_id) for i in self.identities))
        wanted = len(self.identities)
        if not await link.wait_for(lambda: _count(link, DescriptorFrame) >= wanted, self.timeout):
            got = _count(link, DescriptorFrame)
            if link.end is not None:
                how = f"closed with {link.end.code} {link.end.reason or ''!r} ({link.end.cause})"
            else:
                how = f"no more within {self.timeout:g} s"
            await link.close(self.settle)
            return None, f"{got} descriptor(s) for {wanted} hello(s), then {how}"
        return link, ""

    async def request(self, link: ProbeLink, action: dict[str, Any]) -> dict[str, Any] | str:
        """Send ``action``; its result, or what went wrong instead (a string)."""
        [outcome] = await self.requests(link, [action])
        return outcome

    async def requests(
        self, link: ProbeLink, actions: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any] | str]:
        """Send ``actions`` in one WebSocket message (as a gateway may batch them);
        each one's result, or what went wrong instead (a string)."""
        request_ids = [secrets.token_hex(8) for _ in actions]
        link.sent_ids.update(request_ids)
        platform = self.chat_platform or self.identities[0].platform
        bot_id = next((i.bot_id for i in self.identities if i.platform == platform), None)
        frames = [
            Outbound(request_id, action, platform, bot_id or None)
            for request_id, action in zip(request_ids, actions, strict=True)
        ]
        if not await link.send(*frames):
            return ["the connection ended before the request could be sent"] * len(actions)

        def results() -> dict[str, dict[str, Any]]:
            return {
                frame.request_id: frame.result
                for frame in link.frames
                if isinstance(frame, OutboundResult) and frame.request_id in request_ids
            }

        await link.wait_for(lambda: len(results()) == len(request_ids), self.timeout)
        answered = results()
        if link.end is not None:
            missing = f"the connection ended ({link.end.cause}) with no result"
        else:
            missing = f"no outbound_result within {self.timeout:g} s"
        return [answered.get(request_id, missing) for request_id in request_ids]

    def chat_action(self, op: str, **fields: Any) -> dict[str, Any]:
        action: dict[str, Any] = {"op": op, "chat_id": self.chat, **fields}
        if self.routing:
            action["metadata"] = dict(self.routing)
        return action

    # --- the script -------------------------------------------------------------------

    async def run(self) -> None:
        link, why = await self.handshake()
        if link is None:
            self.judge(
                Verdict.failed(
                    "upgrade.accepts",
                    why,
                    "a fresh token is accepted and every hello answered with a descriptor",
                )
            )
            for other in CLAUSES[1:]:
                self.blocked(other.id)
            return
        hellos = len(self.identities)
        self.judge(
            Verdict.passed(
                "upgrade.accepts",
                f"a fresh token was accepted; {hellos} hello(s), {hellos} descriptor(s)",
            )
        )
        self.take_descriptors(link)
        if self.wanted("upgrade.refuses", "upgrade.expired", "close.codes"):
            await self.check_refusals()
        self.check_descriptors(link)
        if self.wanted("results.request-ids"):
            await self.check_request_ids(link)
        if self.wanted("ping"):
            await self.check_ping(link)
        link = await self.check_delivery(link)
        if link is not None and self.wanted("ops.results", "drafts.seal", "idempotency.keys"):
            await self.check_ops(link)
            await self.check_seal(link)
            await self.check_idempotency(link)
        if link is not None:
            await link.close(self.settle)
        self.final_strays()

    def take_descriptors(self, link: ProbeLink) -> None:
        for frame in link.frames:
            if isinstance(frame, DescriptorFrame):
                try:
                    descriptor = Descriptor.from_wire(frame.descriptor)
                except FrameError:
                    continue
                self.descriptors.setdefault(descriptor.platform, descriptor)

    # --- upgrade ----------------------------------------------------------------------

    async def refusal(self, bearer: str | None) -> _Refusal:
        link = await self.dial(bearer)
        if isinstance(link, DialRefused):
            if link.status is not None:
                return _Refusal(http_status=link.status)
            return _Refusal(other=link.cause)
        await link.send(*(Hello(i.platform, i.bot_id) for i in self.identities))
        await link.wait_for(lambda: _count(link, DescriptorFrame) > 0, self.timeout)
        accepted = _count(link, DescriptorFrame) > 0
        end = link.end
        await link.close(self.settle)
        if accepted:
            return _Refusal(accepted=True)
        if end is None:
            return _Refusal(other=f"no close and no descriptor within {self.timeout:g} s")
        if end.code is None or end.code == 1006:
            return _Refusal(other=f"the connection ended without a close frame ({end.cause})")
        return _Refusal(close=(end.code, end.reason or ""), frames_before_close=len(link.frames))

    async def check_refusals(self) -> None:
        wrong = mint_token(
            self.gateway_id, secrets.token_hex(16), ttl=DEFAULT_TOKEN_TTL, now=self.clock()
        )
        # Signed with the right secret, an hour past its expiry.
        expired = mint_token(self.gateway_id, self.secret, ttl=60, now=self.clock() - 3600)
        probes = {
            "a token signed with another secret": await self.refusal(wrong),
            "an upgrade without a token": await self.refusal(None),
            "an expired token": await self.refusal(expired),
        }
        if not self.blocked("upgrade.refuses"):
            served = [
                f"{what} was {probe.describe()}"
                for what, probe in list(probes.items())[:2]
                if probe.accepted
            ]
            if served:
                self.judge(
                    Verdict.failed(
                        "upgrade.refuses",
                        "; ".join(served),
                        "missing or bad credentials are refused (by closing with 4401)",
                    )
                )
            else:
                self.judge(
                    Verdict.passed(
                        "upgrade.refuses",
                        "a token signed with another secret and an upgrade without one were "
                        "both refused",
                    )
                )
        if not self.blocked("upgrade.expired"):
            self.judge(_expired_verdict(probes["an expired token"]))
        if not self.blocked("close.codes"):
            self.judge(_close_codes_verdict(probes))

    # --- descriptors, results, ping ---------------------------------------------------

    def check_descriptors(self, link: ProbeLink) -> None:
        if self.blocked("hello.descriptor"):
            return
        descriptors = [f.descriptor for f in link.frames if isinstance(f, DescriptorFrame)]
        problems: list[str] = []
        if len(descriptors) != len(self.identities):
            problems.append(f"{len(descriptors)} descriptors for {len(self.identities)} hellos")
        for identity, descriptor in zip(self.identities, descriptors, strict=False):
            problems += [
                f"{identity.platform}: {p}"
                for p in descriptor_problems(descriptor, identity.platform)
            ]
        if problems:
            self.judge(
                Verdict.failed(
                    "hello.descriptor",
                    "; ".join(problems),
                    "one descriptor per hello, in order, with contract_version 1, platform, "
                    "label, max_message_length (int), supports_draft_streaming, "
                    "supports_edit, supports_threads (bools), markdown_dialect and len_unit "
                    "(chars or utf16)",
                )
            )
            return
        summary = ", ".join(
            f"{d.platform} ({len(d.effective_ops)} ops)" for d in self.descriptors.values()
        )
        self.judge(Verdict.passed("hello.descriptor", f"descriptors conform: {summary}"))

    async def check_request_ids(self, link: ProbeLink) -> None:
        if self.blocked("results.request-ids"):
            return
        outcomes = await self.requests(link, [{"op": UNKNOWN_OP}] * 2)
        await link.settle(self.settle)
        problems = [o for o in outcomes if isinstance(o, str)] + self.strays
        if problems:
            self.judge(
                Verdict.failed(
                    "results.request-ids",
                    "; ".join(problems),
                    "every outbound (an unknown op included) is answered by exactly one "
                    "outbound_result with the same requestId, and no other",
                )
            )
        else:
            self.judge(
                Verdict.passed(
                    "results.request-ids",
                    f"two requests of the unknown op {UNKNOWN_OP!r}, in one message, were "
                    "answered once each, under their requestIds",
                )
            )

    def final_strays(self) -> None:
        # Results seen after the request-ids check still count against it.
        verdict = self.report.get("results.request-ids")
        if verdict is None or verdict.status is not Status.PASSED or not self.strays:
            return
        self.report.verdicts[self.report.verdicts.index(verdict)] = Verdict.failed(
            "results.request-ids",
            "later in the check: " + "; ".join(self.strays),
            "every outbound is answered by exactly one outbound_result with the same "
            "requestId, and no other",
        )

    async def check_ping(self, link: ProbeLink) -> None:
        if self.blocked("ping"):
            return
        if await link.ping(secrets.token_bytes(8), self.timeout):
            self.judge(Verdict.passed("ping", "a WebSocket ping was answered with its pong"))
        else:
            seen = f"no pong within {self.timeout:g} s"
            if link.end is not None:
                seen = f"no pong; the connection ended ({link.end.cause})"
            self.judge(
                Verdict.failed(
                    "ping",
                    seen,
                    "the connector answers pings (the gateway pings every 10 s and drops a "
                    "link silent for 40 s)",
                )
            )

    # --- going idle and at-least-once delivery ----------------------------------------

    def chat_deliveries(self, link: ProbeLink) -> list[InboundFrame]:
        return [
            f
            for f in link.frames
            if isinstance(f, InboundFrame) and _chat_of(f.event) == str(self.chat)
        ]

    def remember_chat(self, frame: InboundFrame) -> None:
        source = frame.event.get("source")
        if isinstance(source, dict):
            self.routing = {k: source[k] for k in _ROUTING_KEYS if source.get(k) is not None}
            platform = source.get("platform")
            if isinstance(platform, str) and any(i.platform == platform for i in self.identities):
                self.chat_platform = platform

    async def ask(self, text: str) -> bool:
        assert self.write_message is not None and self.chat is not None
        return await self.write_message(self.chat, text)

    async def check_delivery(self, link: ProbeLink) -> ProbeLink | None:
        """The delivery round (or only going idle, without a chat); returns an open,
        live connection for the ops, or ``None`` when none could be had."""
        clauses = ("delivery.redelivers", "delivery.acked", "idle.buffers")
        if not self.wanted("idle.ack", *clauses):
            return link
        reason = None
        if self.chat is None:
            reason = "it needs a chat to write in: pass --chat C"
        elif self.write_message is None:
            reason = "it needs someone to write a message in the chat"
        elif not self.wanted(*clauses):
            reason = "not selected"
        nonce = secrets.token_hex(3)
        first: InboundFrame | None = None
        if reason is None:
            if await self.ask(f"trio-relay conformance check {nonce}, message 1 of 2"):
                await link.wait_for(lambda: bool(self.chat_deliveries(link)), self.timeout)
                found = self.chat_deliveries(link)
                first = found[0] if found else None
                if first is None:
                    reason = f"no message arrived in chat {self.chat} within {self.timeout:g} s"
            else:
                reason = "no one wrote the message it needs"
        if first is None:
            # Going idle alone, on this connection; the ops need a live one after it.
            for clause_id in clauses:
                if self.wanted(clause_id) and not self.blocked(clause_id):
                    self.judge(Verdict.skipped(clause_id, str(reason)))
            if not self.wanted("idle.ack"):
                return link
            await self.check_idle_ack(link)
            await link.close(self.settle)
            fresh, _ = await self.handshake()
            return fresh
        self.remember_chat(first)
        # Left unacked on purpose: the next handshake must replay it.
        await link.close(self.settle)
        second_link, why = await self.handshake()
        if second_link is None:
            for clause_id in ("idle.ack", *clauses):
                if self.wanted(clause_id):
                    self.judge(Verdict.skipped(clause_id, f"no second connection: {why}"))
            return None
        await self.check_redelivery(second_link, first)
        if first.buffer_id is not None:
            await second_link.send(InboundAck(first.buffer_id))
        idle = await self.check_idle_ack(second_link)
        live_after_ack: list[InboundFrame] = []
        wrote_second = False
        if idle:
            before = len(self.chat_deliveries(second_link))
            wrote_second = await self.ask(f"trio-relay conformance check {nonce}, message 2 of 2")
            if wrote_second:
                await second_link.settle(self.settle)
            live_after_ack = [
                f
                for f in self.chat_deliveries(second_link)[before:]
                if f.buffer_id != first.buffer_id
            ]
        await second_link.close(self.settle)
        third_link, why = await self.handshake()
        if third_link is None:
            for clause_id in ("delivery.acked", "idle.buffers"):
                if self.wanted(clause_id) and self.report.get(clause_id) is None:
                    self.judge(Verdict.skipped(clause_id, f"no third connection: {why}"))
            return None

        def second_replayed() -> bool:
            return any(
                f.buffer_id is not None and f.buffer_id != first.buffer_id
                for f in self.chat_deliveries(third_link)
            )

        if wrote_second and not live_after_ack:
            await third_link.wait_for(second_replayed, self.timeout)
        await third_link.settle(self.settle)
        self.check_acked(third_link, first)
        if self.wanted("idle.buffers") and not self.blocked("idle.buffers"):
            self.judge(self.idle_buffers_verdict(third_link, first, wrote_second, live_after_ack))
        for frame in self.chat_deliveries(third_link):
            if frame.buffer_id is not None:
                await third_link.send(InboundAck(frame.buffer_id))
        return third_link

    async def check_idle_ack(self, link: ProbeLink) -> bool:
        if self.blocked("idle.ack"):
            return False
        await link.send(GoingIdle())
        if await link.wait_for(lambda: _count(link, GoingIdleAck) > 0, self.timeout):
            self.judge(Verdict.passed("idle.ack", "going_idle was answered with going_idle_ack"))
            return True
        self.judge(
            Verdict.failed(
                "idle.ack",
                f"no going_idle_ack within {self.timeout:g} s",
                "going_idle is answered by going_idle_ack; only then may the gateway close",
            )
        )
        return False

    async def check_redelivery(self, link: ProbeLink, first: InboundFrame) -> None:
        if not self.wanted("delivery.redelivers") or self.blocked("delivery.redelivers"):
            return
        if first.buffer_id is None:
            self.judge(
                Verdict.skipped(
                    "delivery.redelivers",
                    "the message came live, without a bufferId: nothing to redeliver",
                )
            )
            return

        def replayed() -> bool:
            return any(f.buffer_id == first.buffer_id for f in self.chat_deliveries(link))

        if await link.wait_for(replayed, self.timeout):
            self.judge(
                Verdict.passed(
                    "delivery.redelivers",
                    f"bufferId {first.buffer_id!r}, left unacked, was replayed on the next "
                    "handshake",
                )
            )
        else:
            self.judge(
                Verdict.failed(
                    "delivery.redelivers",
                    f"bufferId {first.buffer_id!r}, delivered and not acked, was not replayed "
                    f"within {self.timeout:g} s of the next handshake",
                    "buffered items are replayed on every handshake until acked",
                )
            )

    def check_acked(self, link: ProbeLink, first: InboundFrame) -> None:
        if not self.wanted("delivery.acked") or self.blocked("delivery.acked"):
            return
        if first.buffer_id is None:
            self.judge(
                Verdict.skipped("delivery.acked", "the message came live, without a bufferId")
            )
            return
        again = [f for f in self.chat_deliveries(link) if f.buffer_id == first.buffer_id]
        if again:
            self.judge(
                Verdict.failed(
                    "delivery.acked",
                    f"bufferId {first.buffer_id!r} was acked, and replayed again on the next "
                    "handshake",
                    "an inbound_ack is a durable receipt: an acked delivery is not replayed",
                )
            )
        else:
            self.judge(
                Verdict.passed(
                    "delivery.acked",
                    f"bufferId {first.buffer_id!r}, acked, was not replayed (watched "
                    f"{self.settle:g} s)",
                )
            )

    def idle_buffers_verdict(
        self,
        link: ProbeLink,
        first: InboundFrame,
        wrote_second: bool,
        live_after_ack: list[InboundFrame],
    ) -> Verdict:
        expected = (
            "from the going_idle_ack on, inbound is buffered and replayed on the next handshake"
        )
        if not wrote_second:
            return Verdict.skipped("idle.buffers", "no one wrote the second message")
        if live_after_ack:
            return Verdict.failed(
                "idle.buffers",
                "the message written after the going_idle_ack came live on that connection",
                expected,
            )
        replayed = [
            f
            for f in self.chat_deliveries(link)
            if f.buffer_id is not None and f.buffer_id != first.buffer_id
        ]
        if not replayed:
            return Verdict.failed(
                "idle.buffers",
                f"the message written while idle was not delivered within {self.timeout:g} s "
                "of the next handshake",
                expected,
            )
        return Verdict.passed(
            "idle.buffers",
            f"the message written while idle came on the next handshake (bufferId "
            f"{replayed[0].buffer_id!r})",
        )

    # --- ops, seal, idempotency -------------------------------------------------------

    def descriptor(self) -> Descriptor | None:
        platform = self.chat_platform or self.identities[0].platform
        return self.descriptors.get(platform)

    async def check_ops(self, link: ProbeLink) -> None:
        if not self.wanted("ops.results") or self.blocked("ops.results"):
            return
        if self.chat is None:
            self.judge(
                Verdict.skipped(
                    "ops.results", "it sends to a chat, and only to one you name: pass --chat C"
                )
            )
            return
        descriptor = self.descriptor()
        ops = descriptor.effective_ops if descriptor is not None else frozenset({"send"})
        checked: list[str] = []
        problems: list[str] = []
        not_checked: list[str] = []

        async def call(op: str, action: dict[str, Any]) -> dict[str, Any] | None:
            outcome = await self.request(link, action)
            checked.append(op)
            if isinstance(outcome, str):
                problems.append(f"{op}: {outcome}")
                return None
            problems.extend(f"{op}: {p}" for p in result_problems(op, outcome))
            return outcome

        text = "trio-relay conformance check"
        if "typing" in ops:
            await call("typing", self.chat_action("typing"))
        message_id: Any = None
        if "send" in ops:
            sent = await call("send", self.chat_action("send", content=text))
            if sent is not None and sent.get("success") is True:
                message_id = sent.get("message_id")
        needs_message = [op for op in ("edit", "react", "delete") if op in ops]
        if message_id is None:
            not_checked += [f"{op} (the send gave no message_id)" for op in needs_message]
        else:
            if "edit" in ops:
                edited = f"{text} (edited)"
                await call("edit", self.chat_action("edit", message_id=message_id, content=edited))
            if "react" in ops:
                await call("react", self.chat_action("react", message_id=message_id, emoji="👍"))
                await call(
                    "react",
                    self.chat_action("react", message_id=message_id, emoji="👍", remove=True),
                )
        if "get_chat_info" in ops:
            await call("get_chat_info", {"op": "get_chat_info", "chat_id": self.chat})
        if "thread_create" in ops:
            anchor = {"message_id": message_id} if message_id is not None else {}
            made = await call(
                "thread_create", self.chat_action("thread_create", thread_name=text, **anchor)
            )
            thread_id = made.get("thread_id") if made is not None else None
            if "thread_rename" in ops:
                if thread_id is None:
                    not_checked.append("thread_rename (thread_create gave no thread_id)")
                else:
                    await call(
                        "thread_rename",
                        self.chat_action(
                            "thread_rename", message_id=thread_id, thread_name=f"{text} (renamed)"
                        ),
                    )
        elif "thread_rename" in ops:
            not_checked.append("thread_rename (thread_create is not advertised)")
        if "prompt" in ops:
            prompt_id = f"conformance.{secrets.token_hex(4)}"
            await call(
                "prompt",
                self.chat_action(
                    "prompt",
                    prompt_kind="choice",
                    prompt_id=prompt_id,
                    content=f"{text}: no need to answer",
                    options=[{"id": "ok", "label": "OK"}],
                ),
            )
        if "task_card" in ops:
            card_id = f"card:{secrets.token_hex(8)}"
            chunk = {"id": "t1", "title": text, "status": "complete"}
            await call("task_card", self.chat_action("task_card", card_id=card_id, chunks=[chunk]))
            if "task_card_stop" in ops:
                await call("task_card_stop", self.chat_action("task_card_stop", card_id=card_id))
        if "follow_up" in ops:
            # No interaction is open, so the connector may well refuse it: only the
            # result's shape is judged.
            await call(
                "follow_up",
                {
                    "op": "follow_up",
                    "session_key": f"conformance:{secrets.token_hex(4)}",
                    "kind": "discord.interaction_token",
                    "content": text,
                },
            )
        if "send_media" in ops:
            not_checked.append("send_media (it needs media the connector can fetch)")
        if "delete" in ops and message_id is not None:
            await call("delete", self.chat_action("delete", message_id=message_id))
        if problems:
            self.judge(
                Verdict.failed(
                    "ops.results",
                    "; ".join(problems),
                    "every result is an object with success (a boolean); error and code "
                    "strings; ids strings or integers; get_chat_info's chat_info {name, type}",
                )
            )
            return
        detail = f"{len(checked)} results of {', '.join(dict.fromkeys(checked))} conform"
        if "draft" in ops:
            not_checked.append("draft (see drafts.seal)")
        if not_checked:
            detail += f"; not checked: {', '.join(not_checked)}"
        self.judge(Verdict.passed("ops.results", detail))

    async def check_seal(self, link: ProbeLink) -> None:
        if not self.wanted("drafts.seal") or self.blocked("drafts.seal"):
            return
        descriptor = self.descriptor()
        if self.chat is None:
            self.judge(Verdict.skipped("drafts.seal", "it streams to a chat: pass --chat C"))
            return
        if descriptor is None or not descriptor.live_cards:
            self.judge(
                Verdict.skipped(
                    "drafts.seal",
                    "the descriptor does not advertise live cards (supports_draft_streaming "
                    "and draft in supported_ops)",
                )
            )
            return
        if not descriptor.stream_is_message:
            self.judge(
                Verdict.skipped(
                    "drafts.seal",
                    f"on {descriptor.platform} the draft is a preview "
                    "(draft_stream_is_message is not true): nothing is sealed",
                )
            )
            return
        draft_id = secrets.randbelow(2**31 - 1) + 1
        text = "trio-relay conformance check (live card)"
        expected = (
            "a repeated seal (same draft_id, final: true) returns the same message_id and "
            "opens no second stream"
        )
        opened = await self.request(
            link, self.chat_action("draft", draft_id=draft_id, content=text[:20], final=False)
        )
        if isinstance(opened, str) or opened.get("success") is not True:
            why = opened if isinstance(opened, str) else opened.get("error") or opened
            self.judge(Verdict.skipped("drafts.seal", f"the first draft was not accepted: {why}"))
            return
        seals: list[dict[str, Any]] = []
        for _ in range(2):
            outcome = await self.request(
                link, self.chat_action("draft", draft_id=draft_id, content=text, final=True)
            )
            if isinstance(outcome, str):
                self.judge(Verdict.failed("drafts.seal", f"a seal: {outcome}", expected))
                return
            problems = result_problems("draft", outcome, seal=outcome.get("success") is True)
            if problems:
                self.judge(Verdict.failed("drafts.seal", "; ".join(problems), expected))
                return
            seals.append(outcome)
        first, again = seals
        if first.get("success") is not True:
            self.judge(
                Verdict.skipped("drafts.seal", f"the seal was refused: {first.get('error')}")
            )
            return
        if again.get("success") is not True or again.get("message_id") != first["message_id"]:
            seen = (
                f"the first seal answered message_id {first['message_id']!r}; the same seal "
                f"again answered {_result_words(again)}"
            )
            self.judge(Verdict.failed("drafts.seal", seen, expected))
            return
        self.judge(
            Verdict.passed(
                "drafts.seal",
                f"both seals of draft {draft_id} answered message_id {first['message_id']!r}",
            )
        )

    async def check_idempotency(self, link: ProbeLink) -> None:
        if not self.wanted("idempotency.keys") or self.blocked("idempotency.keys"):
            return
        descriptor = self.descriptor()
        window = descriptor.raw.get("idempotency_window_s") if descriptor is not None else None
        if not _positive_number(window):
            self.judge(
                Verdict.skipped(
                    "idempotency.keys", "the connector does not advertise idempotency_window_s"
                )
            )
            return
        if self.chat is None:
            self.judge(Verdict.skipped("idempotency.keys", "it sends to a chat: pass --chat C"))
            return
        key = f"conformance:{secrets.token_hex(16)}"
        text = "trio-relay conformance check (idempotency key)"
        action = self.chat_action("send", content=text, idempotency_key=key)
        expected = (
            "within idempotency_window_s a repeated key is answered with the first result "
            "plus replayed: true; a repeat with another action gets code idempotency_conflict"
        )
        outcomes = [
            await self.request(link, action),
            await self.request(link, action),
            await self.request(link, {**action, "content": f"{text} (changed)"}),
        ]
        failures = [o for o in outcomes if isinstance(o, str)]
        if failures:
            self.judge(Verdict.failed("idempotency.keys", "; ".join(failures), expected))
            return
        first, again, changed = (o for o in outcomes if not isinstance(o, str))
        problems: list[str] = []
        if again.get("replayed") is not True:
            problems.append(f"the repeat answered {_result_words(again)}, without replayed: true")
        elif again.get("message_id") != first.get("message_id"):
            problems.append(
                f"the repeat answered message_id {again.get('message_id')!r}, the first "
                f"{first.get('message_id')!r}"
            )
        if changed.get("success") is not False or changed.get("code") != "idempotency_conflict":
            problems.append(f"the repeat with other content answered {_result_words(changed)}")
        message_id = first.get("message_id")
        if message_id is not None and "delete" in (descriptor.effective_ops if descriptor else ()):
            await self.request(link, self.chat_action("delete", message_id=message_id))
        if problems:
            self.judge(Verdict.failed("idempotency.keys", "; ".join(problems), expected))
        else:
            self.judge(
                Verdict.passed(
                    "idempotency.keys",
                    f"a key sent three times: carried out once, replayed once, a changed "
                    f"action refused (window {window:g} s)",
                )
            )


def _count(link: ProbeLink, kind: type[Frame]) -> int:
    return sum(1 for f in link.frames if isinstance(f, kind))


def _chat_of(event: dict[str, Any]) -> str | None:
    source = event.get("source")
    chat = source.get("chat_id") if isinstance(source, dict) else None
    return None if chat is None else str(chat)


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _result_words(result: dict[str, Any]) -> str:
    shown = {k: result[k] for k in ("success", "message_id", "code", "replayed") if k in result}
    return json_kind(result) if not shown else ", ".join(f"{k}: {v!r}" for k, v in shown.items())


def _expired_verdict(probe: _Refusal) -> Verdict:
    expected = "an expired token is refused by closing with 4401 and the reason 'expired'"
    if probe.accepted:
        return Verdict.failed(
            "upgrade.expired", f"an expired token was {probe.describe()}", expected
        )
    if probe.close is None:
        return Verdict.skipped(
            "upgrade.expired",
            f"the refusal carried no close reason ({probe.describe()}); see close.codes",
        )
    if probe.close[1] != "expired":
        return Verdict.failed(
            "upgrade.expired", f"an expired token was {probe.describe()}", expected
        )
    return Verdict.passed(
        "upgrade.expired", "an expired token was refused with the reason 'expired'"
    )


def _close_codes_verdict(probes: dict[str, _Refusal]) -> Verdict:
    refusals = {what: p for what, p in probes.items() if not p.accepted}
    if not refusals:
        return Verdict.skipped("close.codes", "the connector refused nothing (see upgrade.refuses)")
    wrong = [
        f"{what} was {p.describe()}"
        for what, p in refusals.items()
        if p.close is None or p.close[0] != 4401 or p.frames_before_close
    ]
    if wrong:
        return Verdict.failed(
            "close.codes",
            "; ".join(wrong),
            "the connector refuses missing, bad or expired credentials by closing the "
            "WebSocket with code 4401, before any frame",
        )
    return Verdict.passed(
        "close.codes", f"{len(refusals)} refusals, each a close with 4401 before any frame"
    )


async def check_connector(
    url: str,
    *,
    gateway_id: str,
    secret: str,
    identities: Sequence[Identity] = (Identity("relay", ""),),
    chat: str | None = None,
    write_message: WriteMessage | None = None,
    only: Collection[str] = (),
    timeout: float = 10.0,  # noqa: ASYNC109 (each clause's wait is a verdict, not an exception)
    settle: float = 1.0,
    clock: Callable[[], float] = time.time,
) -> Report:
    """Check the connector at base ``url`` against docs/protocol.md, as gateway
    ``gateway_id``; the report of every clause (or of ``only`` those).

    Args:
        url: The connector's base URL, as a gateway is configured with it.
        gateway_id: A gateway id the connector knows. The check connects as that
            gateway and takes its live deliveries while it runs: use one of its own.
        secret: That gateway's secret (it signs the tokens; it is never printed).
        identities: The hellos to send, one per identity, in order.
        chat: The only chat anything is sent to. Without one, the clauses that send
            are skipped, with the reason.
        write_message: Who writes the messages the delivery clauses need in ``chat``
            (see [`WriteMessage`][trio_relay.conformance.WriteMessage]); without one,
            those clauses are skipped.
        only: Clause ids to check (default: all); the clauses they need are checked too.
        timeout: Seconds to wait for anything the contract says must come.
        settle: Seconds to watch for what must not come.
        clock: Unix seconds, for the tokens' expiry.

    Raises:
        ValueError: An unknown clause in ``only``, a bad URL or gateway id, or no
            identity.
    """
    if not identities:
        raise ValueError("identities must name at least one platform to say hello as")
    selected = _with_requirements(only) if only else {c.id for c in CLAUSES}
    normalize_url(url)  # raises ValueError for a URL no gateway could dial
    mint_token(gateway_id, secret, ttl=1, now=0)  # the gateway id's own rule
    report = Report(str(Endpoint.from_url(normalize_url(url))))
    run = _Run(
        url=url,
        gateway_id=gateway_id,
        secret=secret,
        identities=list(identities),
        chat=chat,
        write_message=write_message,
        timeout=timeout,
        settle=settle,
        clock=clock,
        selected=selected,
        report=report,
    )
    await run.run()
    order = {c.id: n for n, c in enumerate(CLAUSES)}
    report.verdicts.sort(key=lambda v: order[v.clause.id])
    return report


def _with_requirements(only: Collection[str]) -> set[str]:
    selected: set[str] = set()
    pending = list(only)
    while pending:
        try:
            wanted = clause(pending.pop())
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        if wanted.id not in selected:
            selected.add(wanted.id)
            pending.extend(wanted.requires)
    return selected
