"""Test helpers users can import: a reference connector.

``open_connector()`` runs a real WebSocket server on loopback that speaks the connector
side of the relay protocol (docs/protocol.md), checks every action the way a real
connector does, records what the gateway sent, plays the users of each chat, and injects
faults on demand::

    from trio_relay.testing import open_connector

    async with open_connector() as connector:
        async with trio_relay.open_relay(connector.url) as relay:
            await connector.wait_session()
            connector.say("C1", "hello")     # a user writes in chat C1
            await connector.wait_acks(1)
            print(connector.transcript_text("C1"))
            await connector.abort()          # a TCP reset

``open_fds()``, ``live_tasks()`` and ``rss_bytes()`` probe what a block must leave as
it found it (file descriptors, Trio tasks, resident memory).
"""

from .._core.extras import install_hint

TESTING_EXTRA = install_hint("testing")
"""The install command for what the reference connector needs beyond the relay."""

# The reference connector is a WebSocket server of its own (trio-websocket on wsproto);
# the relay does not need either, so they are the ``testing`` extra, not requirements.
try:
    import trio_websocket  # noqa: F401
    import wsproto  # noqa: F401
except ImportError as exc:
    raise ImportError(
        f"trio_relay.testing (the reference connector) needs trio-websocket and wsproto "
        f"({exc}), which the base install does not include: {TESTING_EXTRA}",
        name=exc.name,
    ) from exc

from .._core.frames import (  # noqa: E402
    DescriptorFrame,
    Frame,
    GoingIdle,
    GoingIdleAck,
    Hello,
    InboundAck,
    InboundFrame,
    Interrupt,
    InterruptInbound,
    Outbound,
    OutboundResult,
    PassthroughFrame,
)
from ._breaks import ContractBreaks  # noqa: E402
from ._chats import PromptShown, TranscriptEntry  # noqa: E402
from ._connector import ReferenceConnector, open_connector, serve_connector  # noqa: E402
from ._dialers import (  # noqa: E402
    FaultDialer,
    FaultStream,
    MemoryDialer,
    MemoryStream,
    memory_stream_pair,
)
from ._options import ConnectorOptions, JsonObject, OutboundHandler  # noqa: E402
from ._probes import live_tasks, open_fds, rss_bytes, trim_heap  # noqa: E402
from ._protocol import default_descriptor, live_descriptor  # noqa: E402
from ._session import ANONYMOUS, FrameObserver, Session, SessionObserver  # noqa: E402

__all__ = [
    "ANONYMOUS",
    "ConnectorOptions",
    "ContractBreaks",
    "DescriptorFrame",
    "FaultDialer",
    "FaultStream",
    "Frame",
    "FrameObserver",
    "GoingIdle",
    "GoingIdleAck",
    "Hello",
    "InboundAck",
    "InboundFrame",
    "Interrupt",
    "InterruptInbound",
    "JsonObject",
    "MemoryDialer",
    "MemoryStream",
    "Outbound",
    "OutboundHandler",
    "OutboundResult",
    "PassthroughFrame",
    "PromptShown",
    "ReferenceConnector",
    "Session",
    "SessionObserver",
    "TranscriptEntry",
    "default_descriptor",
    "live_descriptor",
    "live_tasks",
    "memory_stream_pair",
    "open_connector",
    "open_fds",
    "rss_bytes",
    "serve_connector",
    "trim_heap",
]
