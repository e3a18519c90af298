"""A person (or a script) playing the users of a reference connector.

``trio-relay connector`` reads lines from standard input and turns each into what a
chat platform would do, so an agent can be driven from a terminal; ``--script FILE``
reads them from a file and waits for the agent to finish each turn before the next::

    C1> hello                 a user writes "hello" in chat C1
    slack:C1> hello           ... on platform slack
    press C1 yes              presses option "yes" of the latest prompt in chat C1
    press n0nce.1a2b3c4d yes  ... of that prompt
    stop C1                   a user presses stop in chat C1 (interrupt_inbound)
    transcript C1             prints the chat so far
    sleep 0.5                 (scripts) waits half a second
    # anything                a comment

Parsing (`parse`) is plain; `Console` carries the commands out on a
[`ReferenceConnector`][trio_relay.testing.ReferenceConnector].
"""

from __future__ import annotations

import datetime
import math
import os
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal, TextIO

import trio

from .._core.frames import Frame
from ._connector import ReferenceConnector
from ._framelog import describe
from ._session import FrameObserver, Session, SessionObserver

HELP = (
    "commands: CHAT> TEXT (a user writes; PLATFORM:CHAT> TEXT names the platform) | "
    "press CHAT|PROMPT_ID OPTION | stop CHAT | transcript CHAT | sleep SECONDS | help"
)

_SAY = re.compile(r"^(?:(?P<platform>[^\s:>]+):)?(?P<chat>[^\s>]+)>\s?(?P<text>.*)$")


@dataclass(frozen=True)
class Say:
    chat_id: str
    text: str
    platform: str | None = None


@dataclass(frozen=True)
class Press:
    target: str
    """A prompt id, or a chat id meaning that chat's latest prompt."""
    option_id: str


@dataclass(frozen=True)
class Stop:
    chat_id: str


@dataclass(frozen=True)
class ShowTranscript:
    chat_id: str


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Help:
    pass


Command = Say | Press | Stop | ShowTranscript | Sleep | Help


class NotUnderstood(ValueError):
    pass


def parse(line: str) -> Command | None:
    """The command on ``line``; ``None`` for a blank line or a comment. Raises
    `NotUnderstood` (saying what would be) for anything else."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    said = _SAY.match(stripped)
    if said is not None:
        return Say(said["chat"], said["text"], said["platform"])
    verb, _, rest = stripped.partition(" ")
    args = rest.split()
    if verb == "press" and len(args) == 2:
        return Press(args[0], args[1])
    if verb == "stop" and len(args) == 1:
        return Stop(args[0])
    if verb == "transcript" and len(args) == 1:
        return ShowTranscript(args[0])
    if verb == "sleep" and len(args) == 1:
        try:
            seconds = float(args[0])
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and seconds >= 0:
            return Sleep(seconds)
    if verb == "help" and not args:
        return Help()
    raise NotUnderstood(f"not understood: {stripped!r}; {HELP}")


class Console:
    """Carries out commands on ``connector`` as the users of ``gateway_id``'s chats."""

    def __init__(self, connector: ReferenceConnector, gateway_id: str, out: TextIO) -> None:
        self.connector = connector
        self.gateway_id = gateway_id
        self.out = out
        self.chats: list[str] = []
        """Chats the console wrote in, in order of first use."""

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def run(self, command: Command) -> None:
        """Carry out ``command`` at once (``Sleep`` is for `replay`)."""
        connector = self.connector
        if isinstance(command, Say):
            if command.chat_id not in self.chats:
                self.chats.append(command.chat_id)
            connector.say(
                command.chat_id,
                command.text,
                platform=command.platform,
                gateway_id=self.gateway_id,
            )
        elif isinstance(command, Press):
            prompt_id = command.target
            if prompt_id not in connector.chats.prompts:
                latest = connector.chats.latest_prompt(command.target)
                if latest is None:
                    raise LookupError(f"no prompt was shown in chat {command.target!r}")
                prompt_id = latest.prompt_id
            connector.press(prompt_id, command.option_id)
        elif isinstance(command, Stop):
            if not connector.press_stop(command.chat_id):
                self.say(f"? stop in {command.chat_id}: no gateway connected; dropped")
        elif isinstance(command, ShowTranscript):
            text = connector.transcript_text(command.chat_id)
            self.say(text.rstrip("\n") or f"(nothing in {command.chat_id} yet)")
        elif isinstance(command, Help):
            self.say(HELP)

    async def interact(self, lines: AsyncIterable[str]) -> None:
        """Carry out each line as it comes; a mistake is reported, never fatal."""
        async for line in lines:
            try:
                command = parse(line)
                if isinstance(command, Sleep):
                    await trio.sleep(command.seconds)
                elif command is not None:
                    self.run(command)
            except (NotUnderstood, LookupError, ValueError) as exc:
                self.say(f"? {exc}")

    # ASYNC109: --timeout of --script: False naming the line that waited too long.
    async def replay(self, lines: list[str], *, timeout: float) -> bool:  # noqa: ASYNC109
        """Play ``lines`` as a conversation: before the first, wait for the gateway;
        after each message, press or stop, wait until the agent has finished its turn (every
        delivery acknowledged) or asks something (a new prompt). Returns false, saying
        why, at the first wait that took longer than ``timeout`` or a line that failed."""
        connector = self.connector
        with trio.move_on_after(timeout) as connecting:
            await connector.wait_until(self._gateway_connected)
        if connecting.cancelled_caught:
            self.say(f"script: no gateway connected within {timeout:g} s")
            return False
        for number, line in enumerate(lines, 1):
            try:
                command = parse(line)
                if isinstance(command, Sleep):
                    await trio.sleep(command.seconds)
                    continue
                if command is None:
                    continue
                turn_over = self._turn_over(len(connector.chats.prompts))
                self.run(command)
            except (NotUnderstood, LookupError, ValueError) as exc:
                self.say(f"script line {number}: {exc}")
                return False
            if not isinstance(command, (Say, Press, Stop)):
                continue
            with trio.move_on_after(timeout) as waiting:
                await connector.wait_until(turn_over)
            if waiting.cancelled_caught:
                self.say(
                    f"script line {number}: the agent did not finish its turn within "
                    f"{timeout:g} s ({len(connector.pending(self.gateway_id))} unacknowledged)"
                )
                return False
        return True

    def _turn_over(self, prompts_before: int) -> Callable[[], bool]:
        """Whether the agent's turn is over: everything delivered was acknowledged
        (its handler returned), or it showed a new prompt (it waits for a press)."""

        def over() -> bool:
            asked = len(self.connector.chats.prompts) > prompts_before
            return asked or not self.connector.pending(self.gateway_id)

        return over

    def _gateway_connected(self) -> bool:
        current = self.connector.current
        return current is not None and current.handshaken and current.gateway_id == self.gateway_id


async def lines_of(fd: int) -> AsyncIterator[str]:
    """The lines readable from file descriptor ``fd`` (standard input), until EOF.

    Read with ``os.read`` in a worker thread: trio cannot wait on a terminal without
    making it non-blocking for every other process sharing it, and a thread blocked in
    ``sys.stdin.readline`` would hold the buffer's lock that interpreter shutdown needs.
    """
    pending = b""
    while True:
        try:
            chunk = await trio.to_thread.run_sync(os.read, fd, 4096, abandon_on_cancel=True)
        except OSError:
            chunk = b""  # no usable standard input (closed): nothing to read
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def _now() -> str:
    return datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]


def frame_printer(out: TextIO) -> FrameObserver:
    """An ``on_frame`` observer printing one line per frame: time, session, direction."""

    def show(session: Session, direction: Literal["in", "out"], frame: Frame) -> None:
        arrow = "<-" if direction == "in" else "->"
        print(f"{_now()} #{session.index} {arrow} {describe(frame)}", file=out, flush=True)

    return show


def session_printer(out: TextIO) -> SessionObserver:
    """An ``on_session`` observer printing a line when a gateway connects or leaves."""

    def show(session: Session, event: Literal["open", "closed"]) -> None:
        if event == "open":
            try:
                host, port = session.peer
                where = f" from {host}:{port}"
            except OSError:
                where = ""  # the socket is already gone
            line = f"gateway {session.gateway_id} connected{where}"
        else:
            reason = f" {session.close_reason}" if session.close_reason else ""
            how = "refused" if session.refused is not None else "closed"
            line = f"{how}: {session.close_code}{reason}"
        print(f"{_now()} #{session.index} {line}", file=out, flush=True)

    return show
