"""The relay protocol on one connection, as frames in and events out (no Trio, no socket).

Each rule of docs/protocol.md that concerns one connection is a table here: the
handshake, which results settle which requests, the end of a connection, deadlines,
inbound classification and going idle.
"""

from __future__ import annotations

import gc
import json
import math
from typing import Any

import pytest

from trio_relay._core.config import Identity
from trio_relay._core.frames import InboundFrame, InterruptInbound, PassthroughFrame
from trio_relay._core.outcome import Outcome
from trio_relay._core.protocol import (
    AllDescriptors,
    IdleAcked,
    LinkUp,
    RelayProtocol,
    Request,
    RequestState,
    ack_line,
    encode_request,
)
from trio_relay._core.request_ids import RequestIds
from trio_relay._core.stats import RelayStats


def line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def descriptor(platform: str, **fields: Any) -> bytes:
    return line(
        {
            "type": "descriptor",
            "descriptor": {"contract_version": 1, "platform": platform, **fields},
        }
    )


def result(request_id: str, **fields: Any) -> bytes:
    return line({"type": "outbound_result", "requestId": request_id, "result": fields})


def hello_protocol(*platforms: str) -> tuple[RelayProtocol, RelayStats]:
    stats = RelayStats()
    protocol = RelayProtocol(stats)
    protocol.hellos([Identity(platform, f"B-{platform}") for platform in platforms])
    return protocol, stats


def connected(*platforms: str) -> tuple[RelayProtocol, RelayStats]:
    protocol, stats = hello_protocol(*platforms)
    for platform in platforms:
        protocol.receive(descriptor(platform))
    return protocol, stats


def request(protocol: RelayProtocol, request_id: str, *, timeout: float = 30.0,
            now: float = 0.0, written: bool = True) -> Request:
    req = Request(request_id, b"line\n", now + timeout, timeout)
    protocol.add(req, now)
    if written:
        req.mark_sending()
    return req


# --- handshake ---------------------------------------------------------------------


def test_hellos_are_one_line_per_identity_in_order() -> None:
    protocol = RelayProtocol(RelayStats())
    lines = protocol.hellos([Identity("slack", "B1"), Identity("discord", "B2")])
    frames = [json.loads(raw) for raw in lines]
    assert [(f["type"], f["platform"], f["botId"]) for f in frames] == [
        ("hello", "slack", "B1"),
        ("hello", "discord", "B2"),
    ]
    assert protocol.platforms == ("slack", "discord")
    assert protocol.missing_descriptors() == ["discord", "slack"]


@pytest.mark.parametrize(
    ("hello", "frames", "events", "descriptors", "rejected"),
    [
        # up on the first descriptor of a hello'd platform
        (["slack"], [descriptor("slack")], [LinkUp("slack")], ["slack"], 0),
        # a descriptor for a platform we did not hello is skipped, and counted
        (["slack"], [descriptor("discord")], [], [], 1),
        # a descriptor that means nothing (no contract_version) is skipped
        (["slack"], [line({"type": "descriptor", "descriptor": {"platform": "slack"}})],
         [], [], 1),
        # the first descriptor of a connection stands; a second changes nothing
        (["slack"], [descriptor("slack", label="one"), descriptor("slack", label="two")],
         [LinkUp("slack")], ["slack"], 0),
        # several identities: up on the first, complete on the last
        (["slack", "discord"], [descriptor("discord"), descriptor("slack")],
         [LinkUp("discord"), AllDescriptors()], ["discord", "slack"], 0),
        (["slack", "discord"], [descriptor("slack")], [LinkUp("slack")], ["slack"], 0),
    ],
)
def test_handshake(
    hello: list[str], frames: list[bytes], events: list[object], descriptors: list[str],
    rejected: int,
) -> None:
    protocol, stats = hello_protocol(*hello)
    seen = [event for frame in frames for event in protocol.receive(frame)]
    assert seen == events
    assert list(protocol.descriptors) == descriptors
    assert protocol.is_up is bool(descriptors)
    assert protocol.missing_descriptors() == sorted(set(hello) - set(descriptors))
    assert stats.frames_rejected == rejected


def test_the_first_descriptor_stands() -> None:
    protocol, _ = hello_protocol("slack")
    protocol.receive(descriptor("slack", label="one") + descriptor("slack", label="two"))
    assert protocol.descriptors["slack"].label == "one"


def test_no_descriptor_is_accepted_before_the_hello() -> None:
    protocol = RelayProtocol(RelayStats())
    assert protocol.receive(descriptor("slack")) == []
    assert not protocol.is_up


# --- results -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "state", "rejected", "settles"),
    [
        # a result settles a request whose frame has started to leave
        (True, RequestState.SETTLED, 0, True),
        # an answer to a frame not yet written is a forgery or a bug: rejected, ignored
        (False, RequestState.PENDING, 1, False),
    ],
)
def test_a_result_settles_only_a_written_request(
    written: bool, state: RequestState, rejected: int, settles: bool
) -> None:
    protocol, stats = connected("slack")
    req = request(protocol, "r1", written=written)
    events = protocol.receive(result("r1", success=True, message_id="M1"))
    assert (events == [req]) is settles
    assert req.state is state
    assert stats.frames_rejected == rejected
    if settles:
        assert req.outcome is not None and req.outcome.success
        assert req.outcome.result["message_id"] == "M1"
        assert protocol.requests == {}
    else:
        assert req.outcome is None and protocol.requests == {"r1": req}


def test_a_plain_success_is_the_outcome_the_connector_answered() -> None:
    # Read by its bytes, made at the first read of Request.outcome: the same outcome as
    # the full decode of any other spelling of it, with a result of each request's own.
    protocol, _ = connected("slack")
    plain = [request(protocol, f"r{i}") for i in range(2)]
    spaced = request(protocol, "r2")
    events = protocol.receive(
        b'{"type":"outbound_result","requestId":"r0","result":{"success":true}}\n'
        b'{"type":"outbound_result","requestId":"r1","result":{"success":true}}\n'
        b'{"type": "outbound_result", "requestId": "r2", "result": {"success": true}}\n'
    )
    assert events == [*plain, spaced]
    outcomes = [req.outcome for req in (*plain, spaced)]
    assert outcomes[0] == outcomes[1] == outcomes[2] == Outcome.answered({"success": True})
    assert repr(outcomes[0]) == repr(outcomes[2])
    assert outcomes[0] is not outcomes[1] and outcomes[0].result is not outcomes[1].result
    assert plain[0].outcome is outcomes[0]  # made once: every read is the same outcome
    assert all(req.state is RequestState.SETTLED for req in (*plain, spaced))


def test_a_plain_success_for_a_request_not_yet_sent_is_rejected() -> None:
    protocol, stats = connected("slack")
    req = request(protocol, "r1", written=False)
    line = b'{"type":"outbound_result","requestId":"r1","result":{"success":true}}\n'
    assert protocol.receive(line) == []
    assert req.outcome is None and stats.frames_rejected == 1


def test_settling_plain_successes_allocates_nothing_per_result() -> None:
    """The reader makes no object per plain success that lives on until its caller runs
    (the outcome is made by the caller, at its first read of Request.outcome): with
    hundreds in flight, an outcome per result waiting for its caller kept CPython's
    young collection running every ~250 requests for nothing (bench throughput, 256
    requesters: 4.0 collections per 1,000 requests, 0.1 without)."""
    protocol, _ = connected("slack")
    reqs = [request(protocol, f"{i:016x}") for i in range(256)]
    payload = b"".join(
        b'{"type":"outbound_result","requestId":"%016x","result":{"success":true}}\n' % i
        for i in range(256)
    )
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        events = protocol.receive(payload)
        # (gc.get_count: objects the collector tracks, made minus freed since the last
        # collection; the few here are the message's lists, not one per result.)
        made = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert events == reqs
    assert made < 16, f"{made} tracked objects made for 256 results"


@pytest.mark.parametrize("how", ["answered", "abandoned", "unknown"])
def test_a_result_for_no_open_request_is_ignored(how: str) -> None:
    protocol, stats = connected("slack")
    req = request(protocol, "r1")
    if how == "answered":
        protocol.receive(result("r1", success=True))
    elif how == "abandoned":
        protocol.abandon(req)
    first = req.outcome
    assert protocol.receive(result("r1" if how != "unknown" else "r9", success=False)) == []
    assert req.outcome is first  # exactly one outcome, the first
    assert stats.frames_rejected == 0


def test_a_message_may_settle_several_requests_in_order() -> None:
    protocol, stats = connected("slack")
    reqs = [request(protocol, f"r{i}") for i in range(3)]
    events = protocol.receive(b"".join(result(f"r{i}", success=True) for i in (2, 0, 1)))
    assert events == [reqs[2], reqs[0], reqs[1]]
    assert stats.frames_received == 1 + 3  # the descriptor, then the results


# --- the end of a connection ---------------------------------------------------------


def test_the_end_settles_every_open_request_once_definite_or_ambiguous() -> None:
    protocol, _ = connected("slack")
    written = request(protocol, "w")
    pending = request(protocol, "p", written=False)
    answered = request(protocol, "a")
    protocol.receive(result("a", success=True))
    settled = protocol.end("closed by peer", 1011, "boom", up_for=2.0)
    assert settled is not None and set(settled) == {written, pending}
    assert written.outcome is not None and written.outcome.ambiguous
    assert written.outcome.code == "connection_lost"
    assert pending.outcome is not None and not pending.outcome.ambiguous
    assert pending.outcome.code == "write_failed"
    assert answered.outcome is not None and answered.outcome.success
    assert protocol.requests == {} and protocol.next_deadline == math.inf
    info = protocol.end_info
    assert info is not None
    assert (info.cause, info.code, info.reason, info.had_handshake, info.up_for) == (
        "closed by peer", 1011, "boom", True, 2.0,
    )
    # Only the first end counts: nothing is settled twice, and its account stays.
    assert protocol.end("keepalive timeout") is None
    assert protocol.end_info is info
    assert written.outcome.code == "connection_lost"


def test_the_protocol_counts_every_outcome_it_settles_once() -> None:
    protocol, stats = connected("slack")
    plain = [request(protocol, f"ok{i}") for i in range(3)]
    request(protocol, "refused")
    request(protocol, "late", timeout=5.0)
    request(protocol, "lost")
    request(protocol, "unsent", written=False)
    # Three plain successes in one message are counted as three.
    protocol.receive(b"".join(result(r.request_id, success=True) for r in plain))
    protocol.receive(result("refused", success=False, code="egress_declined"))
    protocol.expire(5.0)
    protocol.end("closed by peer")
    assert stats.requests == {
        "success": 3, "failed": 1, "timeout": 1, "connection_lost": 1, "write_failed": 1,
    }
    # Nothing settled twice is counted twice: a late result, a second end.
    protocol.receive(result("ok0", success=True))
    assert protocol.end("keepalive timeout") is None
    assert sum(stats.requests.values()) == 7


@pytest.mark.parametrize("how", ["result", "deadline", "end"])
def test_a_caller_cancelled_after_its_request_settled_takes_its_count_back(how: str) -> None:
    """The caller's cancellation and the request's settling in the same scheduler pass:
    the count the protocol made as it settled is taken back when the caller abandons
    the request, since that caller never has the outcome."""
    protocol, stats = connected("slack")
    req = request(protocol, "r1", timeout=5.0)
    if how == "result":
        protocol.receive(result("r1", success=True))
    elif how == "deadline":
        protocol.expire(5.0)
    else:
        protocol.end("closed by peer")
    assert sum(stats.requests.values()) == 1
    protocol.abandon(req)
    assert sum(stats.requests.values()) == 0
    protocol.abandon(req)  # (taken back once)
    assert sum(stats.requests.values()) == 0


def test_a_request_abandoned_before_it_settled_is_never_counted() -> None:
    protocol, stats = connected("slack")
    req = request(protocol, "r1")
    protocol.abandon(req)
    protocol.receive(result("r1", success=True))  # its late result: ignored
    protocol.end("closed by peer")
    assert sum(stats.requests.values()) == 0


@pytest.mark.parametrize("in_flight", [True, False], ids=["in flight", "only cancelled"])
def test_the_end_leaves_no_reference_cycle_for_the_garbage_collector(in_flight: bool) -> None:
    """A connection's requests are freed the moment nothing else holds them, by
    reference counting: not kept (with their ids and the tasks' results) until a
    collection of the oldest generation, whose pause then lands on some later caller."""
    gc.collect()
    gc.disable()
    try:
        protocol, _ = connected("slack")
        for i in range(100):
            req = request(protocol, f"r{i}", timeout=30.0)
            if not in_flight:
                protocol.abandon(req)  # its caller was cancelled: it stays in its group
        del req
        protocol.end("closed by peer")
        del protocol
        assert gc.collect() == 0, "the end left cyclic garbage behind"
    finally:
        gc.enable()


def test_a_deliberate_close_is_the_account_of_the_end() -> None:
    protocol, _ = connected("slack")
    protocol.closing("went dormant", 1000, "dormant", by_us=True)
    protocol.end("closed by peer", 1000, "bye")  # the peer's echo of our close
    info = protocol.end_info
    assert info is not None and (info.cause, info.reason, info.by_us) == (
        "went dormant", "dormant", True,
    )


def test_an_end_before_any_descriptor_had_no_handshake() -> None:
    protocol, _ = hello_protocol("slack")
    protocol.end("handshake timeout")
    assert protocol.end_info is not None and not protocol.end_info.had_handshake


# --- deadlines -----------------------------------------------------------------------


def test_requests_expire_at_their_own_deadlines_in_any_order() -> None:
    protocol, _ = connected("slack")
    reqs = {
        t: request(protocol, f"r{t}", timeout=t, written=t != 2.0) for t in (3.0, 1.0, 2.0, 7.0)
    }
    protocol.receive(result("r7.0", success=True))  # answered: never expires
    expired: list[tuple[float, str]] = []
    now = 0.0
    while protocol.next_deadline < math.inf:
        now = protocol.next_deadline
        expired += [(now, r.request_id) for r in protocol.expire(now)]
    assert expired == [(1.0, "r1.0"), (2.0, "r2.0"), (3.0, "r3.0")]
    for timeout in (1.0, 3.0):
        outcome = reqs[timeout].outcome
        assert outcome is not None and outcome.code == "timeout" and outcome.ambiguous
    unsent = reqs[2.0].outcome
    assert unsent is not None and unsent.code == "timeout" and not unsent.ambiguous
    assert protocol.requests == {}


def test_nothing_expires_before_its_deadline() -> None:
    protocol, _ = connected("slack")
    req = request(protocol, "r", timeout=5.0, now=10.0)
    assert protocol.next_deadline == 15.0
    assert protocol.expire(14.999) == []
    assert protocol.expire(15.0) == [req]


def test_a_request_added_later_with_an_earlier_deadline_moves_the_next_deadline() -> None:
    protocol, _ = connected("slack")
    request(protocol, "slow", timeout=100.0, now=0.0)
    assert protocol.next_deadline == 100.0
    request(protocol, "fast", timeout=2.0, now=1.0)
    assert protocol.next_deadline == 3.0


def test_a_request_without_a_deadline_never_expires() -> None:
    protocol, _ = connected("slack")
    req = Request("r", b"line\n", math.inf, math.inf)
    protocol.add(req, 0.0)
    assert protocol.next_deadline == math.inf and protocol.expire(1e12) == []
    assert protocol.requests == {"r": req}


def test_answered_requests_leave_the_deadline_groups() -> None:
    protocol, _ = connected("slack")
    for i in range(2000):
        request(protocol, f"r{i}", now=i / 1000)
        if i >= 10:  # results come back in order, ten behind
            protocol.receive(result(f"r{i - 10}", success=True))
    assert protocol.deadlines_held <= 11


# --- inbound ---------------------------------------------------------------------------


def test_inbound_frames_are_classified_in_order_and_bad_lines_skipped() -> None:
    protocol, stats = connected("slack")
    payload = b"".join(
        [
            line({"type": "inbound", "event": {"text": "hi"}, "bufferId": "b1"}),
            b"{not json\n",
            line({"type": "interrupt_inbound", "session_key": "s", "chat_id": 42}),
            line({"type": "no_such_type"}),
            line({"type": "passthrough_forward", "forward": {"x": 1}}),
        ]
    )
    events = protocol.receive(payload)
    assert [type(e) for e in events] == [InboundFrame, InterruptInbound, PassthroughFrame]
    assert events[0] == InboundFrame({"text": "hi"}, "b1")
    assert events[1] == InterruptInbound("s", "42")
    assert stats.frames_rejected == 2


def test_a_line_split_across_messages_is_one_frame() -> None:
    protocol, _ = connected("slack")
    req = request(protocol, "r1")
    raw = result("r1", success=True)
    assert protocol.receive(raw[:10]) == []
    assert protocol.receive(raw[10:]) == [req]


@pytest.mark.parametrize(
    ("asked", "events"),
    [(True, [IdleAcked()]), (False, [])],  # an ack we never asked for changes nothing
)
def test_going_idle_ack(asked: bool, events: list[object]) -> None:
    protocol, _ = connected("slack")
    if asked:
        assert json.loads(protocol.going_idle()) == {"type": "going_idle"}
    ack = line({"type": "going_idle_ack"})
    assert protocol.receive(ack) == events
    assert protocol.idle_acked is asked
    assert protocol.receive(ack) == []  # acknowledged once


# --- the outbound frame --------------------------------------------------------------


def test_encode_request_is_the_outbound_frame() -> None:
    ids = RequestIds(lambda n: bytes(n))
    request_id, raw = encode_request(
        ids, {"op": "send", "chat_id": "C1"}, platform="slack", bot_id="B1",
        max_message_bytes=1 << 20,
    )
    assert raw.endswith(b"\n")
    assert json.loads(raw) == {
        "type": "outbound",
        "requestId": request_id,
        "action": {"op": "send", "chat_id": "C1"},
        "platform": "slack",
        "botId": "B1",
    }


@pytest.mark.parametrize(
    ("platform", "bot_id"),
    [(None, None), ("slack", "B1"), ("slack", None), ("slack", ""), ('sl"ack\\', "bö\u2028t")],
)
@pytest.mark.parametrize(
    "action",
    [
        {"op": "send", "chat_id": "C1", "content": "hello"},
        {"op": "send", "content": "snow \u2603, quote \" and newline \n", "n": [1, None, True]},
        {"op": "edit", "nested": {"a": {"b": [{"c": -3}]}}, "x": 1.5},
    ],
)
def test_encode_request_is_the_line_of_the_whole_frame(
    action: dict[str, Any], platform: str | None, bot_id: str | None
) -> None:
    # The line is spliced around the encoded action: it must be byte for byte the
    # compact UTF-8 JSON of the whole frame, whichever codec is active.
    request_id, raw = encode_request(
        RequestIds(), action, platform=platform, bot_id=bot_id, max_message_bytes=1 << 20
    )
    frame: dict[str, Any] = {"type": "outbound", "requestId": request_id, "action": action}
    if platform is not None:
        frame["platform"] = platform
        if bot_id:
            frame["botId"] = bot_id
    whole = json.dumps(frame, separators=(",", ":"), ensure_ascii=False) + "\n"
    assert raw == whole.encode("utf-8")


def test_encode_request_escapes_a_lone_surrogate_and_keeps_the_frame() -> None:
    _, raw = encode_request(
        RequestIds(), {"op": "send", "content": "\ud83d"}, platform="slack", bot_id="B1",
        max_message_bytes=1 << 20,
    )
    assert json.loads(raw)["action"] == {"op": "send", "content": "\ud83d"}
    assert json.loads(raw)["platform"] == "slack"


@pytest.mark.parametrize(
    ("action", "limit", "error"),
    [
        ({"chat_id": "C1"}, 1 << 20, TypeError),  # no op
        ({"op": "send", "x": {1, 2}}, 1 << 20, TypeError),  # not JSON
        ({"op": "send", "content": "x" * 100}, 64, ValueError),  # too large
    ],
)
def test_encode_request_refuses_the_callers_mistakes(
    action: dict[str, Any], limit: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        encode_request(RequestIds(), action, platform=None, bot_id=None,
                       max_message_bytes=limit)


def test_ack_line_is_the_inbound_ack_frame() -> None:
    assert json.loads(ack_line("b-17")) == {"type": "inbound_ack", "bufferId": "b-17"}


# --- keyed requests (idempotency keys) -------------------------------------------------


def keyed(protocol: RelayProtocol, request_id: str, *, attempt: float, deadline: float,
          written: bool = True) -> Request:
    req = Request(request_id, b"line\n", attempt, deadline)
    req.own_deadline = deadline
    protocol.add(req, 0.0)
    if written:
        req.mark_sending()
    return req


def test_a_keyed_attempt_past_its_time_is_handed_back_overdue_not_settled() -> None:
    protocol, stats = connected("slack")
    req = keyed(protocol, "r1", attempt=5.0, deadline=10.0)
    assert protocol.next_deadline == 5.0
    assert protocol.expire(5.0) == [req]
    assert req.outcome is None and req.state is RequestState.WRITTEN
    assert protocol.requests == {"r1": req} and not stats.requests
    protocol.again(req, "r2", 7.5, 5.0)
    assert protocol.next_deadline == 7.5 and set(protocol.requests) == {"r1", "r2"}


@pytest.mark.parametrize("answered", ["r1", "r2"])
def test_a_result_for_any_attempt_settles_the_request_once(answered: str) -> None:
    protocol, stats = connected("slack")
    req = keyed(protocol, "r1", attempt=5.0, deadline=10.0)
    protocol.expire(5.0)
    protocol.again(req, "r2", 10.0, 5.0)
    assert protocol.receive(result(answered, success=True, message_id="m1")) == [req]
    assert req.outcome is not None and req.outcome.result["message_id"] == "m1"
    assert protocol.requests == {}
    other = "r2" if answered == "r1" else "r1"
    assert protocol.receive(result(other, success=True, message_id="m1")) == []  # late
    assert stats.requests == {"success": 1}


def test_an_unwritten_keyed_attempt_waits_for_its_own_deadline() -> None:
    protocol, _ = connected("slack")
    req = keyed(protocol, "r1", attempt=5.0, deadline=10.0, written=False)
    assert protocol.expire(5.0) == []  # nothing of it left: nothing to ask again
    assert protocol.next_deadline == 10.0
    (expired,) = protocol.expire(10.0)
    assert expired is req and req.outcome is not None and not req.outcome.ambiguous


def test_the_end_settles_a_request_sent_twice_once() -> None:
    protocol, stats = connected("slack")
    req = keyed(protocol, "r1", attempt=5.0, deadline=10.0)
    protocol.expire(5.0)
    protocol.again(req, "r2", 10.0, 5.0)
    assert protocol.end("reset") == [req]
    assert req.outcome is not None and req.outcome.ambiguous
    assert stats.requests == {"connection_lost": 1}


def test_an_abandoned_request_sent_twice_leaves_no_id_behind() -> None:
    protocol, _ = connected("slack")
    req = keyed(protocol, "r1", attempt=5.0, deadline=10.0)
    protocol.expire(5.0)
    protocol.again(req, "r2", 10.0, 5.0)
    protocol.abandon(req)
    assert protocol.requests == {}
    assert protocol.receive(result("r2", success=True)) == []
