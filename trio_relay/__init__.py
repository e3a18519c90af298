"""trio_relay: the gateway side of a chat relay, on Trio.

One long-lived WebSocket to a relay connector carries requests and replies and brings
in chat events; every request ends in an honest :class:`Outcome` within bounded time
whatever the network does. See README.md for the guarantees.
"""

from ._config import Identity, RelayConfig, UpgradeAuth
from ._descriptor import Descriptor
from ._errors import RelayClosed, RelayError, RelayRevoked
from ._event import Media, MessageEvent, Source
from ._inbound import DeadLetter
from ._keepalive import KeepaliveConfig
from ._outcome import Outcome
from ._passthrough import PassthroughForward
from ._relay import Relay, open_relay
from ._state import State
from ._stats import RelayStats
from .http import StreamStalled

__all__ = [
    "DeadLetter",
    "Descriptor",
    "Identity",
    "KeepaliveConfig",
    "Media",
    "MessageEvent",
    "Outcome",
    "PassthroughForward",
    "Relay",
    "RelayClosed",
    "RelayConfig",
    "RelayError",
    "RelayRevoked",
    "RelayStats",
    "Source",
    "State",
    "StreamStalled",
    "UpgradeAuth",
    "open_relay",
]
