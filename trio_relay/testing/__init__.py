"""Test helpers users can import: a reference connector.

``open_connector()`` runs a real WebSocket server on loopback that speaks the connector
side of the relay contract, records what the gateway sent, and injects faults on demand::

    from trio_relay.testing import open_connector

    async with open_connector() as connector:
        async with trio_relay.open_relay(connector.url) as relay:
            await connector.wait_session()
            await connector.abort()          # a TCP reset
"""

from ._connector import ReferenceConnector, open_connector, serve_connector
from ._protocol import OutboundHandler, default_descriptor
from ._session import ANONYMOUS, Session

__all__ = [
    "ANONYMOUS",
    "OutboundHandler",
    "ReferenceConnector",
    "Session",
    "default_descriptor",
    "open_connector",
    "serve_connector",
]
