"""The [`Relay`][trio_relay.Relay] handle that ``open_relay`` (``lifetime.py``) yields.

The relay's state and every decision about redialling belong to the pure
``_core/lifecycle.py``; ``supervisor.py`` carries them out; this module is the handle:
requests, pings, going idle or dormant, and the hooks each connection calls as it opens,
comes up and ends. The relay holds its parts and delegates to them: the state API to
`RelayStates`, the adapter methods (``send_text``, ``stream_reply``,
``task_card``, ``ask``, ``typing``, ``descriptor_for``) to
`AdapterPlane`, which sees the relay only as its narrow
``RelayPort``; inbound acks leave through `RelayAcks`, which the
relay points at the newest connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from .._core import outcome as _outcome
from .._core.backoff import Backoff
from .._core.close import NORMAL_CLOSE_CODE, ConnectionEnd
from .._core.codec import encode_wire
from .._core.config import Identity, RelayConfig
from .._core.descriptor import LEGACY_OPS, Descriptor
from .._core.errors import InsecureURLError
from .._core.frames import Interrupt
from .._core.health import Health, assess
from .._core.idempotency import (
    CONTENT_OPS,
    IDEMPOTENCY_KEY,
    SPLIT_ABOVE,
    IdempotencyKeys,
    ResendPlan,
    check_key,
)
from .._core.idle_cut import IdleCut
from .._core.lifecycle import Lifecycle, RedialHold
from .._core.outcome import Outcome, stats_label, with_attempts
from .._core.prompts import OptionSpec, PromptAnswer
from .._core.protocol import Request, encode_request, with_request_id
from .._core.request_ids import RequestIds
from .._core.settings import ConnectionSettings, DialSettings
from .._core.state import State
from .._core.stats import RelayStats
from .._core.telemetry import RequestRecord, Telemetry
from .._core.url import normalize_url
from .adapter.plane import AdapterPlane
from .adapter.streaming import StreamReply
from .adapter.task_cards import TaskCard
from .connection.connection import Connection, abort_sleep
from .connection.serve import ConnectionHooks
from .inbound.acks import RelayAcks
from .inbound.pipeline import InboundPipeline
from .link.dial import Endpoint, dialer_for
from .routes.media import RelayMedia
from .state_feed import RelayStates, StateChanges
from .supervisor import Supervisor

_current_task = trio.lowlevel.current_task
_wait_task_rescheduled = trio.lowlevel.wait_task_rescheduled

logger = logging.getLogger("trio_relay")

async def _park(conn: Connection, request: Request) -> None:
    """Wait until ``request`` is settled or handed back overdue (`wake`).

    The same wait as ``request``'s first attempt, which stays inline there: a coroutine
    call per request is measurable on that path; resends are rare and take this one."""
    try:
        if request.outcome is None:
            task = request.handle = _current_task()
            task.custom_sleep_data = request
            await _wait_task_rescheduled(abort_sleep)
        else:
            await trio.lowlevel.checkpoint()
    except BaseException:
        conn.withdraw(request)
        raise


class Relay:
    """A handle on one relay; get it from [`open_relay`][trio_relay.open_relay].

    ``state``, ``descriptors`` and ``stats`` are live views. ``request`` is safe to
    call from any task, including inbound handlers.
    """

    media: RelayMedia
    """Media upload and download over the connector's HTTP routes (``upload()`` returns
    the ``source_url`` of a ``send_media`` action)."""

    def __init__(
        self,
        url: str,
        *,
        identities: Sequence[Identity],
        mint: Callable[[], str | None],
        config: RelayConfig,
        pipeline: InboundPipeline,
        acks: RelayAcks,
        stats: RelayStats,
        name: str = "",
        telemetry: Telemetry | None = None,
    ) -> None:
        self.name = name
        """This relay in logs and telemetry: its gateway id, else its URL's host."""
        self._telemetry = telemetry
        self._endpoint = Endpoint.from_url(normalize_url(url))
        self.url = str(self._endpoint) + self._endpoint.resource.split("?")[0]
        """The URL dialled, without user info or query (either may hold a secret)."""
        if not (self._endpoint.secure or self._endpoint.is_loopback or config.allow_insecure):
            raise InsecureURLError(self._endpoint.host)
        if not identities:
            raise ValueError("identities must name at least one Identity")
        self._identities = list(identities)
        self._bot_ids = {identity.platform: identity.bot_id for identity in identities}
        self._config = config
        self._pipeline = pipeline
        self._acks = acks
        """Where the pipeline's acks leave: pointed at the newest open connection."""
        self._adapter = AdapterPlane(config, self._bot_ids, stats)
        self._declines = self._adapter.declines
        """The adapter's decline latch (``None`` when off), told by ``request`` how each
        request it sent ended."""
        self.routes = self._adapter.routes
        """Per-chat routing metadata learned from inbound; ``routes.prime(source)``
        seeds a chat before its first inbound (a cold start)."""
        pipeline.add_pre_handler(self._adapter.record_route)
        pipeline.add_intercept(self._adapter.intercept)
        self.stats = stats
        self._conn: Connection | None = None
        """The connection requests go to: open, handshake done."""
        self._newest: Connection | None = None
        """The newest open connection, handshake done or not (acks go on it)."""
        self.descriptors: dict[str, Descriptor] = {}
        self.default_platform: str | None = None
        self._request_ids = RequestIds()
        self._keys = IdempotencyKeys()
        backoff = Backoff(
            initial=config.backoff_initial,
            maximum=config.backoff_max,
            first_delay=config.backoff_first_delay,
            stable_after=config.backoff_stable_after,
            rng=config.rng,
        )
        self._lifecycle = Lifecycle(
            backoff,
            dormant_redial_delay=config.dormant_redial_delay,
            redial_hold_max=config.redial_hold_max,
        )
        self._states = RelayStates(self._lifecycle, self._endpoint, self.url, name)
        self._mint = mint
        """A fresh bearer token per call: each dial (the HTTP routes share it)."""
        self._supervisor = Supervisor(
            lifecycle=self._lifecycle,
            publish=self._states.publish,
            endpoint=self._endpoint,
            dial_settings=DialSettings.from_config(config),
            connection_settings=ConnectionSettings.from_config(config),
            dialer=dialer_for(config),
            stats=stats,
            identities=self._identities,
            mint=self._mint,
            name=name,
            telemetry=telemetry,
            hooks=ConnectionHooks(
                on_open=self._connection_opened,
                on_up=self._connection_up,
                on_end=self._connection_ended,
                on_inbound=pipeline.submit,
            ),
            idle_cut=IdleCut(config.ping_interval, adapt=config.adapt_ping_interval),
        )
        stats.effective_ping_interval = config.ping_interval

    def __repr__(self) -> str:
        return f"<Relay {self._endpoint} state={self.state.value}>"

    # --- state (delegated to RelayStates) ----------------------------------------------

    @property
    def state(self) -> State:
        """The relay's state now (a live view)."""
        return self._states.state

    def state_changes(self) -> StateChanges:
        """Every state change from now on, as ``(old, new, cause)``:

        ```python
        async for old, new, cause in relay.state_changes():
            ...
        ```

        Each call is a subscriber of its own; it ends after the change into ``CLOSED``.
        Publishing never waits for a subscriber: one that falls more than 64 changes
        behind loses the oldest, and the next change it reads starts from the state it
        last saw, with a cause saying how many it missed.
        """
        return self._states.subscribe()

    # ASYNC109: wait_state(timeout=) raises TimeoutError, as documented; a cancel scope works too.
    async def wait_state(self, *states: State, timeout: float | None = None) -> State:  # noqa: ASYNC109
        """Wait until the relay is in one of ``states`` (at once if it is); returns it.

        Raises ``TimeoutError`` after ``timeout`` seconds, and
        [`RelayRevoked`][trio_relay.RelayRevoked] or
        [`RelayClosed`][trio_relay.RelayClosed] as soon as none of ``states`` can be reached any
        more.
        """
        return await self._states.wait_state(frozenset(states), timeout)

    # ASYNC109: wait_connected(timeout=) raises TimeoutError, as documented; a cancel scope works
    # too.
    async def wait_connected(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until a connection is up (handshake done).

        Raises ``TimeoutError`` after ``timeout`` seconds,
        [`RelayRevoked`][trio_relay.RelayRevoked] if the
        connector revoked us, [`RelayClosed`][trio_relay.RelayClosed] once the relay is closed.
        """
        await self._states.wait_connected(timeout)

    # --- the adapter plane (delegated to AdapterPlane) ---------------------------------

    def descriptor_for(self, chat_id: str) -> Descriptor | None:
        """The descriptor of the platform ``chat_id`` lives on (from its inbound, or
        ``routes.prime``); the default platform's for a chat never heard from;
        ``None`` before the first descriptor."""
        return self._adapter.descriptor_for(self, chat_id)

    async def send_text(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> list[Outcome]:
        """Send ``text`` to ``chat_id`` in as many messages as its platform's
        ``max_message_length`` needs (cut at paragraphs, lines, words; see
        [`Descriptor.split_text`][trio_relay.Descriptor.split_text]), in order, ``reply_to`` on the
        first. Returns one
        outcome a piece sent; after a piece fails, the rest is not sent (the outcomes
        end there). An empty text sends nothing. ``format_hints`` (e.g.
        ``{"rich_blocks": True}``) go as ``metadata.format_hints`` where the platform
        has ``supports_block_formatting``, and are left out elsewhere."""
        return await self._adapter.send_text(
            self, chat_id, text, reply_to=reply_to, format_hints=format_hints
        )

    def stream_reply(
        self,
        chat_id: str,
        *,
        reply_to: str | None = None,
        format_hints: Mapping[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[StreamReply]:
        """``async with relay.stream_reply(chat_id) as reply: await reply.write(chunk)``:
        typing until the first text, then one message edited as the text grows (at most
        every ``config.edit_interval`` s), a new message when one is full, a final edit
        on exit; one message per piece where the platform cannot edit. Where the
        platform streams live cards ([`Descriptor.live_cards`][trio_relay.Descriptor.live_cards])
        the reply goes as
        ``draft`` frames instead, ended by a seal or, where the draft is only a
        preview, by an ordinary send. ``reply_to`` is the message the reply answers
        (a thread reply where the platform has threads); ``format_hints`` as for
        [`send_text`][trio_relay.Relay.send_text]. See
        [`StreamReply`][trio_relay.StreamReply] for ``message_ids``, ``outcome``, ``outcomes`` and
        ``failed``."""
        return self._adapter.stream_reply(
            self, chat_id, reply_to=reply_to, format_hints=format_hints
        )

    def task_card(
        self, chat_id: str, *, reply_to: str | None = None
    ) -> AbstractAsyncContextManager[TaskCard]:
        """``async with relay.task_card(chat_id, reply_to=msg_id) as card: await
        card.update([TaskChunk("t1", "Search", "in_progress")])``: a turn's progress as
        a card of task chunks, ended (``task_card_stop``) when the block ends, within
        ``config.close_timeout``. Only where the chat's descriptor lists ``task_card``;
        elsewhere ``update`` returns an ``unsupported_op`` outcome and sends nothing.
        Never raises for a network failure: see [`TaskCard`][trio_relay.TaskCard]."""
        return self._adapter.task_card(self, chat_id, reply_to=reply_to)

    async def ask(
        self,
        chat_id: str,
        question: str,
        options: Iterable[OptionSpec],
        *,
        kind: str = "approval",
        # ASYNC109: ask(timeout=) is the prompt's own life (sent as timeout_s); None at its end.
        timeout: float | None = 60.0,  # noqa: ASYNC109
        reply_to: str | None = None,
    ) -> PromptAnswer | None:
        """Ask ``question`` in ``chat_id`` and wait for the answer, at most ``timeout``
        seconds (``None``: no limit). ``options`` are ``(id, label)`` pairs (or labels,
        dicts, [`PromptOption`][trio_relay.PromptOption]); ``kind`` is ``approval``, ``clarify`` or
        ``choice``. Native buttons (the ``prompt`` op) where the platform advertises
        them, else a numbered list answered by a reply. Returns the
        [`PromptAnswer`][trio_relay.PromptAnswer] (option, label, the answering user's source), or
        ``None``
        at the timeout or when the question could not be sent. The answer is consumed:
        it never reaches ``on_message``. ``reply_to`` is the message the question answers.

        The question's ``prompt_id`` is in the [`PromptAnswer`][trio_relay.PromptAnswer];
        in a test, the reference connector's
        [`latest_prompt`][trio_relay.testing.ReferenceConnector.latest_prompt] gives it
        while the question is open, for
        [`press`][trio_relay.testing.ReferenceConnector.press]."""
        return await self._adapter.ask(
            self, chat_id, question, options, kind=kind, timeout=timeout, reply_to=reply_to
        )

    async def typing(self, chat_id: str, *, status: str | None = None) -> Outcome:
        """Show the typing indicator in ``chat_id``; ``status`` sets a persistent status
        text where the platform has one (Slack), and ``status=""`` clears it."""
        return await self._adapter.typing(self, chat_id, status=status)

    # --- requests --------------------------------------------------------------------

    async def request(
        self,
        action: Mapping[str, Any],
        *,
        platform: str | None = None,
        # ASYNC109: request(timeout=) ends in Outcome(code='timeout', ambiguous=True), which a
        # cancel scope cannot give.
        timeout: float | None = None,  # noqa: ASYNC109
        wait_connected: bool = False,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Send ``action`` to the connector and return how it ended.

        Every failure the network can cause is an [`Outcome`][trio_relay.Outcome] (see its
        ``ambiguous`` flag before retrying). Raises only for cancellation and for the
        caller's own mistakes: an action that is not an object with a string ``op``, is
        not JSON-serialisable, is larger than ``max_message_bytes``, or names a platform
        this relay has no identity for.

        ``timeout`` defaults to ``config.request_timeout``. Between connections the
        request fails at once, unless ``wait_connected`` is true: then it waits for the
        next connection within the same timeout.

        Where the platform's descriptor advertises ``idempotency_window_s``, a content
        op (send, edit, delete, prompt, follow_up, send_media, task_card) carries an
        ``idempotency_key``, and an ambiguous ending is not the end: the same action
        under the same key is sent again on the next connection, or when its result is
        overdue, until the connector answers or the deadline passes (see
        ``config.retry_ambiguous``). The outcome's ``attempts`` says how many times it
        was written, ``replayed`` whether the connector answered from an earlier
        attempt. ``idempotency_key`` is the caller's own key (at most 64 characters of
        ``A-Z a-z 0-9 _ . : -``, for a content op only), for a request that must stay
        one across the caller's own restarts; the relay's keys are unique per process
        otherwise. Keys are never logged above DEBUG.
        """
        if idempotency_key is not None:
            check_key(idempotency_key)
        # The one send point: fills the chat's routing metadata, strips unrendered format
        # hints, refuses content for a latched chat and a draft after its seal; and
        # below, once settled, the latch learns how the request ended.
        routed = self._adapter.route(self, action, platform)
        bot_id = None
        if routed is not None:
            if routed.refused is not None:
                self.stats.requests[stats_label(routed.refused)] += 1
                return routed.refused
            action, platform, bot_id = routed.action, routed.platform, routed.bot_id
        # (Encoded here, not in a helper: a call and a tuple less per request.)
        if platform is not None and platform not in self._bot_ids:
            raise ValueError(
                f"no identity for platform {platform!r}; configured: {sorted(self._bot_ids)}"
            )
        try:
            op = action.get("op")
        except AttributeError:  # not a mapping: encode_request says so
            op = None
        key = None
        if idempotency_key is None and op in CONTENT_OPS:
            # The common case inline (a call less per request): a content op, the
            # relay's own key where the platform advertises the window.
            descriptor = self.descriptors.get(platform or self.default_platform or "")
            if IDEMPOTENCY_KEY in action:
                key = self._key_for(action, op, platform, None)
            elif (
                descriptor is not None
                and descriptor.idempotency_window_s is not None
                and self._config.retry_ambiguous
            ):
                key = self._keys.next()
        elif idempotency_key is not None:
            key = self._key_for(action, op, platform, idempotency_key)
        request_id, line = encode_request(
            self._request_ids,
            action,
            platform=platform,
            bot_id=None if platform is None else bot_id or self._bot_ids[platform],
            max_message_bytes=self._config.max_message_bytes,
            idempotency_key=None if key is None or IDEMPOTENCY_KEY in action else key,
        )
        op = action["op"]  # (a str: encode_request checked it)
        timeout = self._config.request_timeout if timeout is None else timeout
        if not timeout > 0:  # NaN fails this too
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        # One clock read per request: the deadline's, and the protocol's "now" for its
        # deadline groups unless the request waited for a connection (0.2 us a read).
        now = trio.current_time()
        deadline = now + timeout
        keyed = key is not None and self._config.retry_ambiguous
        telemetry = self._telemetry
        record = None if telemetry is None else telemetry.request_started(op, request_id)
        # The hot path is flat on purpose: every coroutine level between the caller
        # and the waiter is paid again each time the request's task is resumed.
        ready = self._ready(op, platform)
        if ready is None and wait_connected:
            ready = await self._wait_ready(op, platform, deadline, timeout)
            now = trio.current_time()
        if ready is None:
            outcome = _outcome.not_connected(self.state.value)
        elif isinstance(ready, Connection):
            if keyed:
                # Its first attempt has half the time: a lost result is asked again in
                # time (see ResendPlan); the request's own deadline stays.
                attempt = now + timeout / 2 if timeout > SPLIT_ABOVE else deadline
                submitted = ready.submit(request_id, line, attempt, timeout, now)
            else:
                submitted = ready.submit(request_id, line, deadline, timeout, now)
                del line  # (sent or queued: not held by this frame while it waits)
            if isinstance(submitted, Outcome):
                if keyed and submitted.code != _outcome.QUEUE_FULL:
                    # The link ended a moment ago: the next one may take it.
                    assert key is not None
                    return await self._exactly_once(
                        key, action, line, op, platform, timeout, deadline, record, None, None
                    )
                outcome = submitted
            else:
                if keyed:
                    submitted.own_deadline = deadline
                # Waits here, not in a coroutine of the connection's (see above); the
                # connection's ``wake`` ends the wait once the protocol settled it.
                try:
                    if submitted.outcome is None:
                        task = submitted.handle = _current_task()
                        task.custom_sleep_data = submitted
                        await _wait_task_rescheduled(abort_sleep)
                    else:
                        await trio.lowlevel.checkpoint()
                except BaseException:
                    ready.withdraw(submitted)
                    raise
                settled = submitted.outcome
                if keyed and (
                    settled is None  # overdue: asked again
                    or (not settled.success and settled.code in _outcome.GATEWAY_CODES)
                ):
                    assert key is not None
                    return await self._exactly_once(
                        key, action, line, op, platform, timeout, deadline, record, ready,
                        submitted,
                    )
                assert settled is not None
                # Counted in stats.requests by the protocol as it settled the request
                # (a connection's end counts all K of its requests at once).
                if record is not None:
                    record.settled(settled)
                if self._declines is not None and (not settled.success or op == "send"):
                    self._adapter.settled(self, action, settled)
                return settled
        else:
            outcome = ready  # a refusal: nothing is sent
        self.stats.requests[stats_label(outcome)] += 1  # (an outcome made here, never counted)
        if record is not None:
            record.settled(outcome)
        return outcome

    # --- exactly once (docs/protocol.md, "Idempotency keys") ----------------------

    def _window_of(self, platform: str | None) -> float | None:
        """The idempotency window the platform's descriptor advertises, or None."""
        descriptor = self.descriptors.get(platform or self.default_platform or "")
        return None if descriptor is None else descriptor.idempotency_window_s

    def _key_for(
        self, action: Mapping[str, Any], op: object, platform: str | None, caller_key: str | None
    ) -> str | None:
        """This request's idempotency key (added to the action unless it carries one
        already), or None: not a content op, or a platform without the extension."""
        if caller_key is not None:
            if isinstance(op, str) and op not in CONTENT_OPS:
                raise ValueError(
                    f"idempotency_key is for content ops ({', '.join(sorted(CONTENT_OPS))}); "
                    f"{op!r} is not one"
                )
            if IDEMPOTENCY_KEY in action:
                raise ValueError("the action carries an idempotency_key already; give the key once")
        elif IDEMPOTENCY_KEY in action:
            # The caller's own, inside the action: sent as it is, and resent under it.
            own: str = check_key(action[IDEMPOTENCY_KEY])
            return own if self._window_of(platform) is not None else None
        if self._window_of(platform) is None:
            return None  # nothing of the extension for this platform: the same bytes
        if caller_key is not None:
            return caller_key
        return self._keys.next() if self._config.retry_ambiguous else None

    async def _exactly_once(
        self,
        key: str,
        action: Mapping[str, Any],
        line: bytes,
        op: str,
        platform: str | None,
        timeout: float,  # noqa: ASYNC109 (the resend loop's own budget, settled into an Outcome)
        deadline: float,
        record: RequestRecord | None,
        conn: Connection | None,
        submitted: Request | None,
    ) -> Outcome:
        """A keyed request whose first attempt got no answer from the connector (it is
        ``submitted`` on ``conn``, woken settled or overdue; or it could not be sent):
        written again under the same key, on the same connection when its result is
        overdue, on the relay's next connection when its own ended (waited for within
        the deadline), until the connector answers or the deadline passes."""
        plan = ResendPlan(deadline)
        plan.tries = 1
        counts = self.stats.requests
        outcome: Outcome | None = None
        """What ended the attempts, when it was not an attempt's own ending."""
        last: Outcome | None = None
        """The latest attempt's ending; ambiguous once one attempt was written."""
        now = trio.current_time()
        while True:
            if submitted is None or conn is None:
                if not plan.again(now):
                    break
                ready = self._ready(op, platform)
                if ready is None:
                    ready = await self._wait_ready(op, platform, deadline, timeout)
                    now = trio.current_time()
                if isinstance(ready, Outcome):
                    outcome = ready  # a refusal, or the deadline came while waiting
                    break
                if self._window_of(platform) is None:
                    break  # this connection's connector does not honour keys
                request_id = self._request_ids.next()
                line = with_request_id(line, request_id)
                self._log_resend(op, plan.tries + 1, key)
                attempt = plan.attempt_deadline(now)
                sent = ready.submit(request_id, line, attempt, timeout, now)
                if isinstance(sent, Outcome):
                    # Not sent: the link ended a moment ago (the next one is waited
                    # for), or the outbox is full (sending again would fill it more).
                    if sent.code == _outcome.QUEUE_FULL:
                        outcome = sent
                        break
                    await trio.lowlevel.checkpoint()
                    now = trio.current_time()
                    continue
                conn, submitted = ready, sent
                submitted.own_deadline = deadline
                await _park(conn, submitted)
            written = 0
            while submitted.outcome is None:
                # Overdue: written, no result in its attempt's time. Lost, or slow: asked
                # again under the same key; an answer to either settles it.
                now = trio.current_time()
                written += 1
                request_id = self._request_ids.next()
                line = with_request_id(line, request_id)
                self._log_resend(op, plan.tries + 1, key)
                conn.resend(submitted, request_id, line, plan.attempt_deadline(now), now)
                await _park(conn, submitted)
            settled = submitted.outcome
            if submitted.may_have_left:
                plan.attempts += 1 + written
            submitted = None
            if settled.success or settled.code not in _outcome.GATEWAY_CODES:
                # The connector's answer (counted by the protocol as it settled it).
                final = with_attempts(settled, plan.attempts)
                if record is not None:
                    record.settled(final)
                if self._declines is not None and (not final.success or op == "send"):
                    self._adapter.settled(self, action, final)  # (the decline latch)
                return final
            # Not the caller's outcome: the protocol's count of it is taken back.
            counts[stats_label(settled)] -= 1
            if settled.ambiguous or last is None or not last.ambiguous:
                last = settled
            now = trio.current_time()
        if plan.attempts:
            # Written, never answered: ambiguous however the attempts ended.
            assert last is not None and last.ambiguous
            final = _outcome.timed_out(timeout, written=True) if now >= deadline else last
            final = with_attempts(final, plan.attempts)
        else:
            final = outcome or last or _outcome.not_connected(self.state.value)
        counts[stats_label(final)] += 1  # (an outcome made or kept here)
        if record is not None:
            record.settled(final)
        if self._declines is not None:
            self._adapter.settled(self, action, final)
        return final

    def _log_resend(self, op: str, attempt: int, key: str) -> None:
        # The key at DEBUG only: a caller's own key may name what it stands for.
        logger.debug(
            "relay %s: %s request sent again (attempt %d), idempotency key %s",
            self._endpoint,
            op,
            attempt,
            key,
            extra={"relay": self.name},
        )

    def _ready(self, op: str, platform: str | None) -> Connection | Outcome | None:
        """The connection to send on now, the outcome of a request that will not be
        sent, or None when there is no connection (yet)."""
        lifecycle = self._lifecycle  # (not the properties: this runs for every request)
        if lifecycle.closing:
            return _outcome.closing()
        if lifecycle.state is State.REVOKED:
            return _outcome.revoked()
        conn = self._conn
        if conn is None:
            return None
        target = platform or self.default_platform or ""
        descriptor = self.descriptors.get(target)
        if descriptor is not None:
            if not descriptor.supports(op):
                return _outcome.unsupported_op(op, descriptor.platform)
        elif op not in LEGACY_OPS:
            # No descriptor (yet) for this platform: only what every platform takes.
            return _outcome.unsupported_op(op, target)
        return conn

    async def _wait_ready(
        # ASYNC109: carries request()'s timeout= into the wait for a connection.
        self, op: str, platform: str | None, deadline: float, timeout: float  # noqa: ASYNC109
    ) -> Connection | Outcome:
        """``wait_connected``: the next connection (or a refusal) within the deadline."""
        with trio.move_on_at(deadline):
            while True:
                ready = self._ready(op, platform)
                if ready is not None:
                    return ready
                await self._states.feed.changed()
        return _outcome.timed_out(timeout, written=False)

    # ASYNC109: ping(timeout=) raises TimeoutError, as documented.
    async def ping(self, timeout: float | None = None) -> float:  # noqa: ASYNC109
        """Round-trip a WebSocket ping now; returns the RTT in seconds.

        Raises ``ConnectionError`` when there is no connection (or it drops meanwhile)
        and ``TimeoutError`` when no pong arrives within ``timeout`` (default:
        ``config.ping_timeout``).
        """
        conn = self._conn
        if conn is None:
            raise ConnectionError(f"relay not connected (state {self.state.value})")
        limit = self._config.ping_timeout if timeout is None else timeout
        with trio.move_on_after(limit):
            rtt = await conn.ping()
            if rtt is None:
                raise ConnectionError("the connection ended before the pong")
            return rtt  # (its round trip reached the telemetry in the connection)
        raise TimeoutError(f"no pong within {limit:g} s")

    def interrupt(self, session_key: str, reason: str | None = None) -> bool:
        """Tell the connector to stop the session ``session_key`` (an ``interrupt`` frame,
        with the optional ``reason``; fire and forget). False when there is no
        connection to send it on."""
        conn = self._conn
        frame = Interrupt(session_key, reason)
        return conn is not None and conn.send_line(encode_wire(frame.to_wire()))

    def interrupted(self, chat_id: str) -> bool:
        """Whether the user asked to stop the turn running now in ``chat_id``.

        True after an ``interrupt_inbound`` for that chat cancelled its turn (with
        `RelayConfig.interrupt_cancels_turn`): the way a handler tells a stop from any
        other cancellation, in its ``except trio.Cancelled`` or ``finally``:

        ```python
        try:
            ...
        finally:
            if relay.interrupted(event.source.chat_id):
                with trio.CancelScope(shield=True), trio.move_on_after(2):
                    await relay.send_text(event.source.chat_id, "Stopped.")
        ```

        Args:
            chat_id: The chat whose running turn to ask about.

        Returns:
            False once the handler has returned, and for a chat with no turn running.
        """
        return self._pipeline.interrupted(chat_id)

    # ASYNC109: go_idle(timeout=) answers False when the ack does not come in time.
    async def go_idle(self, timeout: float = 5.0) -> bool:  # noqa: ASYNC109
        """Ask the connector to switch us to buffered-only delivery (``going_idle``);
        true once acked, false when no connection is up or no ack came within
        ``timeout`` seconds (the connection is kept)."""
        conn = self._conn
        if conn is None:
            return False
        if await conn.go_idle(timeout):
            return True
        if conn.is_open:
            logger.warning(
                "relay %s: no going_idle_ack within %g s; keeping the connection",
                self._endpoint,
                timeout,
                extra={"relay": self.name},
            )
        return False

    # ASYNC109: go_dormant(timeout=) answers False when the ack does not come in time.
    async def go_dormant(self, timeout: float = 5.0, *, hold: float | None = None) -> bool:  # noqa: ASYNC109
        """Go idle, then close the socket on purpose; the redial stays armed and fires
        after ``config.dormant_redial_delay``. If the connector does not acknowledge
        within ``timeout``, the connection is kept and false is returned.

        ``hold``: hold the redial for that many seconds in the same step (as
        [`hold_redial`][trio_relay.Relay.hold_redial] does, placed before the socket closes, so no
        dial can slip in
        between); the relay then dials when the hold ends, instead of after
        ``dormant_redial_delay``. Nothing is held when false is returned."""
        if hold is not None:
            RedialHold.check(hold)  # a bad value raises before anything is sent
        conn = self._conn
        if conn is None or not await self.go_idle(timeout) or not conn.is_open:
            return False
        if hold is not None:
            self.hold_redial(hold)
        self._lifecycle.dormant_requested = True
        await conn.close(NORMAL_CLOSE_CODE, "dormant", "went dormant", by_us=True)
        return True

    def hold_redial(self, seconds: float) -> None:
        """Start no dial for ``seconds`` (at most ``config.redial_hold_max``), for a
        brokered suspend: the state stays ``DORMANT`` or ``RECONNECTING`` and
        [`health`][trio_relay.Relay.health] says ``"redial held"``. The hold ends at
        [`release_redial`][trio_relay.Relay.release_redial],
        at its time or at the cap, whichever is first, and then the relay dials at once
        (the hold replaces the backoff wait it interrupted). A hold placed while
        connected holds the redial after the link ends. A new hold replaces the one
        before (its time counts from now). Raises ``ValueError`` unless ``seconds`` is a
        positive number."""
        length = self._lifecycle.hold.hold(seconds, trio.current_time())
        self.stats.redial_holds += 1
        logger.info("relay %s: redial held for %.3g s", self._endpoint, length)
        self._supervisor.hold_changed.notify()

    def release_redial(self) -> None:
        """End a redial hold now: a relay waiting on it dials at once. Nothing happens
        without a hold."""
        if self._lifecycle.hold.release():
            logger.info("relay %s: redial hold released", self._endpoint)
            self._supervisor.hold_changed.notify()

    def health(self) -> Health:
        """The relay's health, for a health endpoint: ``live`` is false only when the
        relay is ``REVOKED`` or ``CLOSED`` or one of its tasks failed; ``ready`` only
        when ``CONNECTED``. A dormant, held or reconnecting relay is live and not ready
        (suspended is not down). ``since`` is when the state last changed (Trio's
        monotonic clock); ``reason`` says why, in words; ``latched_chats`` names the
        chats latched after an egress decline (``RelayConfig.latch_declines``)."""
        lifecycle = self._lifecycle
        return assess(
            lifecycle.state,
            since=self._states.since,
            closing=lifecycle.closing,
            held=lifecycle.hold.active(trio.current_time()),
            tasks_failed=self.stats.tasks_failed,
            last_end=lifecycle.last_end,
            latched_chats=self._adapter.latched_chats(),
        )

    # --- connection hooks (called synchronously by the connection) ----------------

    def _connection_opened(self, conn: Connection) -> None:
        # Acks go on the newest open socket, handshake done or not: the connector
        # replays buffered deliveries right after its descriptor, before we count
        # ourselves connected.
        self._newest = self._acks.link = conn

    def _connection_up(self, conn: Connection) -> None:
        # Up on the first descriptor: the connection's dict is shared, so descriptors
        # arriving later appear here as they come.
        descriptors = self.descriptors = conn.descriptors
        self.default_platform = next(iter(descriptors), None)
        self.stats.connects += 1
        self._conn = conn
        up = self._lifecycle.link_up(f"handshake done, platforms {sorted(descriptors)}")
        self._states.publish(up)

    def _connection_ended(self, conn: Connection) -> None:
        # Called synchronously by whichever task saw the end, so that requests made
        # from now on fail at once instead of queueing on a dead socket.
        end: ConnectionEnd | None = conn.end_info
        assert end is not None
        if not end.by_us:
            cause = end.cause.split(":")[0]
            self.stats.drops[cause] += 1
            if self._telemetry is not None:
                self._telemetry.dropped(cause)
        self._supervisor.link_ended(end, trio.current_time() - conn.ws.last_received)
        self.stats.last_close_code = end.code
        self.stats.last_close_reason = end.reason
        if self._newest is conn:
            self._newest = self._acks.link = None
        if self._conn is conn:
            self._conn = None
            self._states.publish(self._lifecycle.link_lost(end))

    # --- shutdown --------------------------------------------------------------------

    async def _shutdown(self) -> None:
        deadline = trio.current_time() + self._config.drain_timeout
        if self._config.go_idle_on_close and self._conn is not None:
            # Still serving (requests and inbound) until the ack: an event that races
            # the close is then delivered live, or buffered for our next start.
            with trio.move_on_at(deadline):
                await self._conn.go_idle(self._config.drain_timeout)
        # Closing first: requests made from now on are refused, and the connection's
        # end below changes no state but CLOSED.
        self._lifecycle.closing = True
        conn = self._conn or self._newest  # one still in its handshake is closed too
        # Requests and running handlers share one drain bound (going idle included); a
        # handler's ack needs the socket, so the drain comes before the close.
        with trio.move_on_at(deadline):
            async with trio.open_nursery() as drains:
                drains.start_soon(self._pipeline.drain)
                if conn is not None:
                    drains.start_soon(conn.wait_drained)
        if conn is not None:
            last_ack = self._acks.last
            if last_ack is not None and conn.is_open:
                # Acks of handlers that finished in the drain leave before the close.
                with trio.move_on_after(self._config.close_timeout):
                    await last_ack.written.wait()
            await conn.close(NORMAL_CLOSE_CODE, "gateway closing", "closed by us", by_us=True)
        self._closed()

    def _closed(self) -> None:
        if self.state is not State.CLOSED:
            self._states.publish(self._lifecycle.close())
