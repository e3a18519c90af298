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

from ._chats import PromptShown, TranscriptEntry
from ._connector import ReferenceConnector, open_connector, serve_connector
from ._dialers import FaultDialer, FaultStream, MemoryDialer
from ._options import ConnectorOptions, OutboundHandler
from ._probes import live_tasks, open_fds, rss_bytes, trim_heap
from ._protocol import default_descriptor
from ._session import ANONYMOUS, FrameObserver, Session, SessionObserver

__all__ = [
    "ANONYMOUS",
    "ConnectorOptions",
    "FaultDialer",
    "FaultStream",
    "FrameObserver",
    "MemoryDialer",
    "OutboundHandler",
    "PromptShown",
    "ReferenceConnector",
    "Session",
    "SessionObserver",
    "TranscriptEntry",
    "default_descriptor",
    "live_tasks",
    "open_connector",
    "open_fds",
    "rss_bytes",
    "serve_connector",
    "trim_heap",
]
