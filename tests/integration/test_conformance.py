"""``trio_relay.conformance`` against the reference connector: it passes every clause,
and each deliberately broken variant (one promise of docs/protocol.md broken, through
the connector's fault knobs or a `ContractBreaks` field) fails exactly its clause and
no other.

Every check runs whole (all its clauses), so "no other" is seen, not assumed. The waits
for what never comes in a broken variant are `TIMEOUT`; loopback answers take
milliseconds, so the passing runs never approach it.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from trio_relay.conformance import CLAUSES, Report, Status, check_connector
from trio_relay.testing import (
    ContractBreaks,
    ReferenceConnector,
    Session,
    live_descriptor,
    open_connector,
)

GATEWAY, SECRET, CHAT = "conformance-gw", "s3cret-for-tests", "C1"
TIMEOUT = 2.0
SETTLE = 0.3

EVERY_OP = live_descriptor(
    stream_is_message=True,
    task_cards=True,
    extra_ops=(
        "react",
        "delete",
        "get_chat_info",
        "thread_create",
        "thread_rename",
        "prompt",
        "send_media",
    ),
)
"""Every op of protocol v1, and live cards that are the message (a seal to check)."""


@dataclass(frozen=True)
class Variant:
    """A reference connector with one promise broken."""

    clause: str
    connector: dict[str, Any] = field(default_factory=dict)
    """Keywords of open_connector beyond the defaults."""
    after_open: Callable[[ReferenceConnector], None] | None = None


def _ignore_pings(session: Session, event: str) -> None:
    if event == "open":
        session.ignore_pings()


async def _success_as_a_number(session: Session, frame: Any) -> dict[str, Any]:
    return {"success": 1, "message_id": "m1"}


VARIANTS = [
    Variant("upgrade.accepts", after_open=lambda c: c.refuse_upgrades(100)),
    Variant("upgrade.refuses", {"breaks": ContractBreaks(require_token=False)}),
    Variant("upgrade.expired", {"breaks": ContractBreaks(expired_reason="unauthorized")}),
    Variant("close.codes", {"breaks": ContractBreaks(auth_close_code=1008)}),
    Variant("hello.descriptor", {"descriptors": {"*": {**EVERY_OP, "supports_edit": "yes"}}}),
    Variant("results.request-ids", {"breaks": ContractBreaks(echo_request_ids=False)}),
    Variant("ops.results", {"outbound_handler": _success_as_a_number}),
    Variant("ping", {"on_session": _ignore_pings}),
    Variant("idle.ack", {"breaks": ContractBreaks(ack_going_idle=False)}),
    Variant("idle.buffers", {"breaks": ContractBreaks(buffer_when_idle=False)}),
    Variant("delivery.redelivers", {"breaks": ContractBreaks(replay_delivered=False)}),
    Variant("delivery.acked", {"breaks": ContractBreaks(honour_acks=False)}),
    Variant("drafts.seal", {"breaks": ContractBreaks(seal_tombstones=False)}),
]


@asynccontextmanager
async def connector(**options: Any) -> AsyncIterator[ReferenceConnector]:
    options.setdefault("descriptors", {"*": EVERY_OP})
    async with open_connector(secrets={GATEWAY: SECRET}, **options) as c:
        yield c


async def check(c: ReferenceConnector, **options: Any) -> Report:
    """The whole check of ``c``, its users writing in CHAT when asked."""

    async def write(chat_id: str, text: str) -> bool:
        c.say(chat_id, text, gateway_id=GATEWAY)
        return True

    options.setdefault("chat", CHAT)
    return await check_connector(
        c.url,
        gateway_id=GATEWAY,
        secret=SECRET,
        write_message=write,
        timeout=TIMEOUT,
        settle=SETTLE,
        **options,
    )


def statuses(report: Report) -> dict[str, Status]:
    return {v.clause.id: v.status for v in report.verdicts}


async def test_the_reference_connector_passes_every_clause() -> None:
    async with connector() as c:
        report = await check(c)
    lines = "\n".join(report.lines())
    assert [v.clause.id for v in report.verdicts] == [c.id for c in CLAUSES], lines
    assert statuses(report) == {
        **{c.id: Status.PASSED for c in CLAUSES},
        "idempotency.keys": Status.SKIPPED,
    }, lines
    assert report.ok
    skip = report.get("idempotency.keys")
    assert skip is not None and "idempotency_window_s" in skip.detail


def test_every_clause_but_idempotency_has_a_broken_variant() -> None:
    assert {v.clause for v in VARIANTS} == {c.id for c in CLAUSES} - {"idempotency.keys"}


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.clause for v in VARIANTS])
async def test_a_broken_variant_fails_exactly_its_clause(variant: Variant) -> None:
    async with connector(**variant.connector) as c:
        if variant.after_open is not None:
            variant.after_open(c)
        report = await check(c)
    lines = "\n".join(report.lines())
    failed = [v.clause.id for v in report.verdicts if v.status is Status.FAILED]
    assert failed == [variant.clause], lines
    verdict = report.get(variant.clause)
    assert verdict is not None and verdict.seen and verdict.expected
    assert f"docs/protocol.md#{verdict.clause.link.partition('#')[2]}" in verdict.line()
    assert not report.ok


async def test_without_a_chat_what_sends_or_needs_a_message_is_skipped_with_the_reason() -> None:
    async with connector() as c:
        report = await check(c, chat=None)
    skipped = {v.clause.id: v.detail for v in report.verdicts if v.status is Status.SKIPPED}
    needs_chat = {
        "ops.results",
        "idle.buffers",
        "delivery.redelivers",
        "delivery.acked",
        "drafts.seal",
    }
    assert needs_chat <= set(skipped), report.lines()
    assert all("--chat" in skipped[c] for c in needs_chat), skipped
    # Going idle needs neither, and is checked.
    assert statuses(report)["idle.ack"] is Status.PASSED
    # Nothing was sent to any chat, and no chat was written in.
    assert [f.action["op"] for f in c.outbound] == ["conformance_probe"] * 2
    assert report.ok


async def test_only_runs_the_named_clauses_and_what_they_need() -> None:
    async with connector() as c:
        report = await check(c, only=["drafts.seal"])
    assert [v.clause.id for v in report.verdicts] == [
        "upgrade.accepts",
        "results.request-ids",
        "ops.results",
        "drafts.seal",
    ]
    assert report.ok


async def test_the_legacy_descriptor_skips_what_it_does_not_advertise() -> None:
    async with connector(descriptors={"*": {"supported_ops": []}}) as c:
        report = await check(c)
    assert report.ok, report.lines()
    seal = report.get("drafts.seal")
    assert seal is not None and seal.status is Status.SKIPPED
    ops = report.get("ops.results")
    assert ops is not None and ops.status is Status.PASSED
    assert "typing, send, edit, follow_up" in ops.detail


async def test_a_failure_says_what_was_seen_and_what_the_contract_says() -> None:
    async with connector(breaks=ContractBreaks(auth_close_code=1008)) as c:
        report = await check(c, only=["close.codes"])
    verdict = report.get("close.codes")
    assert verdict is not None
    lines = verdict.line().splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    parts = " ".join(line.strip() for line in lines).split(" seen: ")
    assert parts[0] == (
        "FAIL close.codes: a refusal is a close frame with code 4401, before any frame"
    )
    seen, contract = parts[1].split(" contract: ")
    assert seen == (
        "a token signed with another secret was closed with 1008 'unauthorized'; "
        "an upgrade without a token was closed with 1008 'unauthorized'; an expired token "
        "was closed with 1008 'expired'"
    )
    assert contract == (
        "the connector refuses missing, bad or expired credentials by closing "
        "the WebSocket with code 4401, before any frame (docs/protocol.md#close-codes)"
    )
    assert lines[1].startswith("     seen: ")
    data = report.to_json()
    assert data["ok"] is False and data["failed"] == 1
    assert data["clauses"][-1] == {
        "clause": "close.codes",
        "status": "fail",
        "title": verdict.clause.title,
        "section": "docs/protocol.md#close-codes",
        "seen": verdict.seen,
        "expected": verdict.expected,
    }


# --- idempotency keys: a connector of this test's own honours them -----------------------


def keyed_handler(*, honour: bool) -> Callable[[Session, Any], Any]:
    """Answers every op with a message id; with ``honour``, a repeated
    ``idempotency_key`` as docs/protocol.md's extension says (the first result plus
    ``replayed: true``; another action under it refused)."""
    ids = itertools.count(1)
    seen: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    async def handle(session: Session, frame: Any) -> dict[str, Any]:
        action = dict(frame.action)
        key = action.get("idempotency_key")
        if honour and isinstance(key, str) and key in seen:
            first_action, first_result = seen[key]
            if first_action != action:
                return {
                    "success": False,
                    "code": "idempotency_conflict",
                    "error": "another action under this key",
                }
            return {**first_result, "replayed": True}
        result = {"success": True, "message_id": f"m{next(ids)}"}
        if isinstance(key, str):
            seen[key] = (action, result)
        return result

    return handle


@pytest.mark.parametrize("honour", [True, False])
async def test_idempotency_keys_are_checked_where_the_window_is_advertised(honour: bool) -> None:
    descriptors = {"*": {"supported_ops": [], "idempotency_window_s": 60}}
    async with connector(
        descriptors=descriptors, outbound_handler=keyed_handler(honour=honour)
    ) as c:
        report = await check(c, only=["idempotency.keys"])
    verdict = report.get("idempotency.keys")
    assert verdict is not None
    if honour:
        assert verdict.status is Status.PASSED, report.lines()
    else:
        assert verdict.status is Status.FAILED
        assert verdict.seen is not None and "replayed: true" in verdict.seen
    assert [v.clause.id for v in report.verdicts if v.status is Status.FAILED] == (
        [] if honour else ["idempotency.keys"]
    )
    keyed = [f.action for f in c.outbound if "idempotency_key" in f.action]
    assert len(keyed) == 3 and len({a["idempotency_key"] for a in keyed}) == 1
