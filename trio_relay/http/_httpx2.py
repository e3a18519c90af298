"""The ``httpx2`` family (what ``openai`` 3.x and ``anthropic`` 2.x take): the typed
public functions of [`trio_relay.http`][trio_relay.http], documented in `._clients`. Imported only
when one of them is first used, so ``import trio_relay`` works without httpx2 installed."""

from __future__ import annotations

import httpcore2
import httpx2

from ._clients import ClientFunctions

# No __all__: these names are public as trio_relay.http's, which lists them.
_HTTPX2: ClientFunctions[httpx2.AsyncClient, httpx2.Client] = ClientFunctions(httpx2, httpcore2)

keepalive_client = _HTTPX2.keepalive_client
keepalive_sync_client = _HTTPX2.keepalive_sync_client
llm_client = _HTTPX2.llm_client
llm_sync_client = _HTTPX2.llm_sync_client
