"""``trio-relay connector`` driven as a person drives it: a real subprocess, user lines on
its standard input (or a script), a real relay as the agent, every frame in its output.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

import trio_relay
from trio_relay.testing._console import Press, Say, ShowTranscript, Sleep, Stop, parse

CONNECTOR = [sys.executable, "-m", "trio_relay.cli", "connector", "--no-auth"]


class Output:
    """The lines of a process's standard output, read as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.lines: list[str] = []
        self._partial = b""

    async def until(self, needle: str) -> str:
        """Read until a line containing ``needle`` arrived; that line."""
        with trio.fail_after(30):
            while True:
                for line in self.lines:
                    if needle in line:
                        self.lines.remove(line)
                        return line
                chunk = await self.stream.receive_some()
                assert chunk, f"output ended before {needle!r}"
                *complete, self._partial = (self._partial + chunk).split(b"\n")
                self.lines.extend(line.decode() for line in complete)

    async def rest(self) -> str:
        with trio.fail_after(30):
            while chunk := await self.stream.receive_some():
                self._partial += chunk
        return "\n".join(self.lines) + "\n" + self._partial.decode()


@asynccontextmanager
async def connector_process(*argv: str) -> AsyncIterator[tuple[trio.Process, Output, str]]:
    process = await trio.lowlevel.open_process(
        [*CONNECTOR, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        output = Output(process.stdout)
        url = (await output.until("url: ")).partition("url: ")[2].strip()
        await output.until("serving")
        yield process, output, url
    finally:
        if process.returncode is None:
            process.kill()
        with trio.fail_after(10):
            await process.wait()


@asynccontextmanager
async def echo_agent(url: str) -> AsyncIterator[trio_relay.Relay]:
    """An agent: replies ``echo: TEXT`` to every message; asks before a deploy."""
    relays: list[trio_relay.Relay] = []

    async def on_message(event: trio_relay.MessageEvent) -> None:
        chat_id = event.source.chat_id
        assert chat_id is not None
        if event.text == "deploy":
            # The press is consumed by ask (it never reaches on_message); echo it.
            answer = await relays[0].ask(chat_id, "Sure?", [("yes", "Yes"), ("no", "No")])
            content = f"echo: /{answer.option_id}" if answer else "echo: no answer"
        else:
            content = f"echo: {event.text}"
        await relays[0].request({"op": "send", "chat_id": chat_id, "content": content})

    async with trio_relay.open_relay(
        url, identities=[trio_relay.Identity("slack", "B1")], on_message=on_message
    ) as relay:
        relays.append(relay)
        yield relay


def test_console_lines_parse() -> None:
    assert parse("C1> hello there") == Say("C1", "hello there")
    assert parse("slack:C1>hi") == Say("C1", "hi", "slack")
    assert parse("C1> ") == Say("C1", "")
    assert parse("press C1 yes") == Press("C1", "yes")
    assert parse("stop C1") == Stop("C1")
    assert parse("transcript C1") == ShowTranscript("C1")
    assert parse("sleep 0.5") == Sleep(0.5)
    assert parse("  # a comment") is None and parse("") is None
    for wrong in ("hello", "press C1", "stop", "sleep soon", "sleep -1", "sleep nan"):
        try:
            parse(wrong)
        except ValueError as exc:
            assert "not understood" in str(exc) and "CHAT> TEXT" in str(exc)
        else:
            raise AssertionError(f"{wrong!r} parsed")


async def test_a_person_writes_and_reads_every_frame() -> None:
    async with connector_process() as (process, output, url):
        async with echo_agent(url) as relay:
            await relay.wait_connected(10)
            assert "#0 gateway anonymous connected from 127.0.0.1:" in await output.until(
                "connected"
            )
            assert "<- hello slack bot=B1" in await output.until("<- hello")
            assert "-> descriptor slack max=4096 chars ops=send,edit" in await output.until(
                "-> descriptor"
            )
            assert process.stdin is not None
            await process.stdin.send_all(b"C1> hello there\nnonsense\n")
            inbound = await output.until("-> inbound")
            assert inbound.endswith('-> inbound buf-1 slack:C1 U1: "hello there"')
            request = await output.until("<- outbound")
            # Routed: the envelope names the chat's platform, metadata its user.
            assert request.endswith(
                '[slack] send chat_id=C1 "echo: hello there" metadata{user_id=U1}'
            )
            assert (await output.until("-> outbound_result")).endswith("ok message_id=m1")
            assert (await output.until("<- inbound_ack")).endswith("<- inbound_ack buf-1")
            assert "? not understood: 'nonsense'" in await output.until("not understood")
            await process.stdin.send_all(b"press C9 yes\n")
            assert (await output.until("no prompt")) == "? no prompt was shown in chat 'C9'"
            await process.stdin.send_all(b"transcript C1\n")
            assert (await output.until("U1 #u1")) == "U1 #u1: hello there"
            assert (await output.until("bot send")) == "bot send #m1: echo: hello there"
        # The agent left: its session ends with the relay's close code.
        assert "#0 closed: 1000" in await output.until("closed:")


async def test_a_script_replays_a_conversation_and_prints_the_transcript(tmp_path: Path) -> None:
    script = tmp_path / "talk.txt"
    script.write_text(
        "# a conversation\nC1> one\nC1> two\n\nC2> three\nC2> deploy\npress C2 yes\ntranscript C1\n"
    )
    async with connector_process("--script", str(script), "--quiet") as (process, output, url):
        async with echo_agent(url):
            with trio.fail_after(30):
                await process.wait()
        text = await output.rest()
    assert process.returncode == 0, text
    assert "--- transcript of C1\nU1 #u1: one\nbot send #m1: echo: one\nU1 #u2: two\n" in text
    assert (
        "--- transcript of C2\nU1 #u3: three\nbot send #m3: echo: three\nU1 #u4: deploy\n"
        "bot prompt #m4: Sure? [yes: Yes] [no: No]\nU1 [prompt_response] #u5: /yes\n"
        "bot send #m5: echo: /yes\n"
    ) in text
    assert "<- " not in text  # --quiet: no frames


async def test_a_script_fails_when_a_turn_never_ends(tmp_path: Path) -> None:
    script = tmp_path / "talk.txt"
    script.write_text("C1> are you there?\nC1> never sent\n")
    async with connector_process("--script", str(script), "--timeout", "0.5") as (
        process,
        output,
        url,
    ):

        async def stuck(event: trio_relay.MessageEvent) -> None:
            await trio.sleep_forever()

        async with trio_relay.open_relay(url, on_message=stuck):
            with trio.fail_after(30):
                await process.wait()
        text = await output.rest()
    assert process.returncode == 1
    assert "script line 1: the agent did not finish its turn within 0.5 s" in text
    assert "never sent" not in text


async def test_a_script_waits_for_a_gateway_then_gives_up(tmp_path: Path) -> None:
    script = tmp_path / "talk.txt"
    script.write_text("C1> hello\n")
    async with connector_process("--script", str(script), "--timeout", "0.2") as (
        process,
        output,
        _,
    ):
        with trio.fail_after(30):
            await process.wait()
        text = await output.rest()
    assert process.returncode == 1
    assert "script: no gateway connected within 0.2 s" in text


def test_an_unreadable_script_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CONNECTOR, "--script", str(tmp_path / "missing.txt")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("trio-relay connector: cannot read the script:")


async def test_a_script_presses_stop_on_a_turn_waiting_for_an_answer(tmp_path: Path) -> None:
    # The agent asks before a deploy and waits; the user presses stop instead of
    # answering: the turn ends (acked), nothing after the question.
    script = tmp_path / "talk.txt"
    script.write_text("C1> deploy\nstop C1\ntranscript C1\n")
    async with connector_process("--script", str(script), "--quiet") as (process, output, url):
        async with echo_agent(url) as relay:
            with trio.fail_after(30):
                await process.wait()
            assert relay.stats.turns_interrupted == 1
        text = await output.rest()
    assert process.returncode == 0, text
    assert (
        "--- transcript of C1\nU1 #u1: deploy\nbot prompt #m1: Sure? [yes: Yes] [no: No]\n"
        "U1 [stop]\n---"
    ) in text + "---", text


async def test_the_connector_command_honours_idempotency_keys() -> None:
    async with connector_process("--idempotency-window", "60") as (_, output, url):
        async with trio_relay.open_relay(
            url, identities=[trio_relay.Identity("slack", "B1")]
        ) as relay:
            await relay.wait_connected(10)
            assert relay.descriptors["slack"].idempotency_window_s == 60
            assert (await output.until("-> descriptor")).endswith(" idempotency=60s")
            action = {"op": "send", "chat_id": "C1", "content": "once"}
            first = await relay.request(action, idempotency_key="reply-1")
            again = await relay.request(action, idempotency_key="reply-1")
            request = await output.until("<- outbound")
            assert request.endswith('send chat_id=C1 keyed "once"')  # never the key itself
            assert "ok message_id=m1" in await output.until("-> outbound_result")
            assert (await output.until("-> outbound_result")).endswith(
                "ok message_id=m1 replayed=True"
            )
        assert first.success and not first.replayed
        assert again.success and again.replayed
        assert "reply-1" not in "\n".join(output.lines)


def test_a_bad_idempotency_window_is_one_line() -> None:
    done = subprocess.run(
        [*CONNECTOR, "--idempotency-window", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "trio-relay connector: --idempotency-window must be a positive number of seconds, got 0"
    )
