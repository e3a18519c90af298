"""Prompts you can await: [`Relay.ask`][trio_relay.Relay.ask] (docs/protocol.md, "Prompts").

`PromptBroker` mints prompt ids and matches the answers to the callers waiting
for them. Answers are taken off the inbound stream *at submit*, before the lanes: a
handler that asks a question and awaits the press holds its chat's lane, and the press
arrives in that same chat, so matching it in the lane would wait for the handler that is
waiting for it. Every ``prompt_response`` is consumed there: ours resolve a waiter (or,
late, are dropped), a sibling gateway's (another nonce) are dropped, and neither ever
reaches ``on_message`` as ``/option`` text.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import trio

from ..._core.event import MessageEvent
from ..._core.outcome import Outcome
from ..._core.prompts import (
    PROMPT_KINDS,
    OptionSpec,
    PromptAnswer,
    PromptOption,
    fallback_text,
    is_own,
    match_reply,
    mint_prompt_id,
    normalize_options,
    prompt_action,
)

if TYPE_CHECKING:
    from .port import RelayPort

__all__ = ["PROCESS_NONCE", "PromptBroker"]

logger = logging.getLogger("trio_relay")

PROCESS_NONCE = secrets.token_hex(4)
"""This process's prompt-id nonce: sibling gateways (other processes) mint others."""


@dataclass(eq=False)
class _Pending:
    prompt_id: str
    chat_id: str
    options: Sequence[PromptOption]
    by_text: bool  # the numbered-text fallback: a matching reply answers it
    done: trio.Event = field(default_factory=trio.Event)
    answer: PromptAnswer | None = None


class PromptBroker:
    """Open prompts of one relay and the inbound that answers them.

    ``token`` makes the 8-hex part of each id (injectable for tests); ``nonce``
    defaults to `PROCESS_NONCE`.
    """

    # No __dict__: one per relay (or per connection), held for its whole life.
    __slots__ = ("_pending", "_token", "dropped_foreign", "dropped_late", "nonce")

    def __init__(
        self,
        *,
        nonce: str = PROCESS_NONCE,
        token: Callable[[], str] = lambda: secrets.token_hex(4),
    ) -> None:
        self.nonce = nonce
        self._token = token
        self._pending: dict[str, _Pending] = {}
        self.dropped_foreign = 0
        """Presses for prompts a sibling gateway minted (dropped, acked)."""
        self.dropped_late = 0
        """Presses for our own prompts that nobody awaits any more (expired, answered)."""

    @property
    def open_prompts(self) -> int:
        return len(self._pending)

    def mint(self) -> str:
        return mint_prompt_id(self.nonce, self._token())

    # --- the inbound side (synchronous: runs at submit, before any lane) -------------

    def intercept(self, event: MessageEvent) -> bool:
        """True if ``event`` is an answer (or a press) and so is consumed here."""
        response = event.prompt_response
        if response is not None:
            pending = self._pending.get(response.prompt_id)
            if pending is not None:
                option = next((o for o in pending.options if o.id == response.option_id), None)
                label = response.label or (option.label if option else response.option_id)
                self._resolve(pending, response.option_id, label, event, "button")
            elif is_own(response.prompt_id, self.nonce):
                self.dropped_late += 1
                logger.info("prompt %s: press arrived after the wait ended", response.prompt_id)
            else:
                self.dropped_foreign += 1
                logger.debug("prompt %s: a sibling gateway's press, dropped", response.prompt_id)
            return True
        chat_id = event.source.chat_id
        for pending in self._pending.values():
            if pending.by_text and pending.chat_id == chat_id:
                option = match_reply(event.text, pending.options)
                if option is not None:
                    self._resolve(pending, option.id, option.label, event, "text")
                    return True
        return False

    def _resolve(
        self,
        pending: _Pending,
        option_id: str,
        label: str,
        event: MessageEvent,
        via: Literal["button", "text"],
    ) -> None:
        pending.answer = PromptAnswer(pending.prompt_id, option_id, label, event.source, via)
        del self._pending[pending.prompt_id]
        pending.done.set()

    # --- the asking side -------------------------------------------------------------

    async def ask(
        self,
        relay: RelayPort,
        chat_id: str,
        question: str,
        options: Iterable[OptionSpec],
        *,
        kind: str,
        # ASYNC109: carries Relay.ask's timeout=.
        timeout: float | None,  # noqa: ASYNC109
        reply_to: str | None,
    ) -> PromptAnswer | None:
        """See [`Relay.ask`][trio_relay.Relay.ask]."""
        if kind not in PROMPT_KINDS:
            raise ValueError(f"prompt kind must be one of {sorted(PROMPT_KINDS)}, got {kind!r}")
        normalized = normalize_options(options)
        prompt_id = self.mint()
        descriptor = relay.descriptor_for(chat_id)
        native = descriptor is not None and descriptor.supports("prompt")
        # Registered before the prompt goes out: a quick press can beat the result.
        pending = _Pending(prompt_id, chat_id, normalized, by_text=not native)
        self._pending[prompt_id] = pending
        limit = math.inf if timeout is None else timeout
        try:
            with trio.move_on_after(limit):
                if native:
                    refused = await self._send_native(
                        relay, pending, question, kind, timeout, reply_to
                    )
                    if refused is not None and refused.egress_declined:
                        return None  # the chat refused us: never asked again in words
                    if refused is not None:
                        pending.by_text = True  # the connector refused the op: ask in words
                        native = False
                if not native:
                    outcomes = await relay.send_text(
                        chat_id, fallback_text(question, normalized), reply_to=reply_to
                    )
                    if not any(o.success or o.ambiguous for o in outcomes):
                        logger.warning("prompt %s: the question could not be sent", prompt_id,
                                       extra={"relay": relay.name})
                        return None
                await pending.done.wait()
            return pending.answer
        finally:
            self._pending.pop(prompt_id, None)

    async def _send_native(
        self,
        relay: RelayPort,
        pending: _Pending,
        question: str,
        kind: str,
        # ASYNC109: carries Relay.ask's timeout=.
        timeout: float | None,  # noqa: ASYNC109
        reply_to: str | None,
    ) -> Outcome | None:
        """Send the prompt op; ``None`` when it may be on screen, else its refusal."""
        action = prompt_action(
            pending.chat_id, pending.prompt_id, question, pending.options, kind, timeout, reply_to
        )
        outcome = await relay.request(action)
        if outcome.success or outcome.ambiguous:
            # Ambiguous: the buttons may be on screen; a press would still count.
            return None
        if outcome.egress_declined:
            # Never retried as another op: the chat would decline the text as well.
            logger.warning(
                "prompt %s: the connector declined egress to chat %r (%s); not asked",
                pending.prompt_id,
                pending.chat_id,
                outcome.error,
                extra={"relay": relay.name, "cause": outcome.code},
            )
            return outcome
        logger.warning(
            "prompt %s: the prompt op failed (%s); asking with numbered text instead",
            pending.prompt_id,
            outcome.error,
            extra={"relay": relay.name, "cause": outcome.code},
        )
        return outcome
