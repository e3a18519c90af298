"""trio_relay: the gateway side of a chat relay, on Trio.

One long-lived WebSocket to a relay connector carries requests and replies and brings
in chat events; every request ends in an honest [`Outcome`][trio_relay.Outcome] within bounded time
whatever the network does. See README.md for the guarantees.
"""

from ._core.config import Identity, RelayConfig, UpgradeAuth
from ._core.dedupe_store import DedupeStore, MemoryDedupeStore
from ._core.descriptor import Descriptor
from ._core.enrichments import ContextMessage, PromptResponse, ReplyTo
from ._core.errors import RelayClosed, RelayError, RelayRevoked
from ._core.event import Media, MessageEvent, Source
from ._core.health import Health
from ._core.keepalive import KeepaliveConfig
from ._core.media import MediaError, MediaTooLarge
from ._core.outcome import Outcome
from ._core.passthrough import PassthroughForward
from ._core.policy import RelevancePolicy
from ._core.prompts import PromptAnswer, PromptOption
from ._core.routes import Route, RouteTable
from ._core.state import State
from ._core.stats import RelayStats
from ._trio.adapter.streaming import StreamReply
from ._trio.adapter.task_cards import TaskCard, TaskChunk, TaskStatus
from ._trio.inbound.pipeline import DeadLetter
from ._trio.lifetime import open_relay
from ._trio.otel import OpenTelemetry
from ._trio.relay import Relay
from ._trio.state_feed import StateChanges
from ._trio.stores.redis import RedisDedupeStore
from ._trio.stores.sqlite import SqliteDedupeStore
from .http._stall import StreamStalled

__version__ = "0.1.0"
"""This release's version (PEP 440); the package metadata and ``trio-relay --version``
take it from here."""

__all__ = [
    "ContextMessage",
    "DeadLetter",
    "DedupeStore",
    "Descriptor",
    "Health",
    "Identity",
    "KeepaliveConfig",
    "Media",
    "MediaError",
    "MediaTooLarge",
    "MemoryDedupeStore",
    "MessageEvent",
    "OpenTelemetry",
    "Outcome",
    "PassthroughForward",
    "PromptAnswer",
    "PromptOption",
    "PromptResponse",
    "RedisDedupeStore",
    "Relay",
    "RelayClosed",
    "RelayConfig",
    "RelayError",
    "RelayRevoked",
    "RelayStats",
    "RelevancePolicy",
    "ReplyTo",
    "Route",
    "RouteTable",
    "Source",
    "SqliteDedupeStore",
    "State",
    "StateChanges",
    "StreamReply",
    "StreamStalled",
    "TaskCard",
    "TaskChunk",
    "TaskStatus",
    "UpgradeAuth",
    "open_relay",
]
