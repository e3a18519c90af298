"""The same clients for the ``httpx`` 0.28 family, for SDKs that still take an
``httpx.AsyncClient`` / ``httpx.Client`` (``openai`` 1.x, ``anthropic`` 0.x, ...).

Install with ``pip install 'trio_relay[httpx]'``. Every function behaves exactly as its
namesake in [`trio_relay.http`][trio_relay.http] (same keepalive options, proxy handling, kwargs
rules and timeouts); only the client class differs:

```python
from trio_relay.http.httpx1 import llm_client
client = OldSDK(http_client=llm_client())      # an httpx.AsyncClient
```
"""

from __future__ import annotations

import httpcore
import httpx

from ._clients import ClientFunctions

__all__ = ["keepalive_client", "keepalive_sync_client", "llm_client", "llm_sync_client"]

_HTTPX: ClientFunctions[httpx.AsyncClient, httpx.Client] = ClientFunctions(httpx, httpcore)

keepalive_client = _HTTPX.keepalive_client
keepalive_sync_client = _HTTPX.keepalive_sync_client
llm_client = _HTTPX.llm_client
llm_sync_client = _HTTPX.llm_sync_client
