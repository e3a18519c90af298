"""``RedisDedupeStore``: one memory of handled deliveries for every replica and host.

Each delivery key becomes one Redis key, ``{prefix}{gw:<gateway id>}:<dedupe key>``, so
gateways (tenants) sharing a server never collide; the braces are a Redis Cluster hash
tag, so one gateway's keys share a slot and a batch of them is one script call there
too. Its value says who has it:

- **claim** (right before a handler runs): ``GET``, and if the key is free ``SET key
  claim:<this replica> PX lease``, in one Lua step. Atomic, so two replicas never run
  one delivery at once: the loser sees the other's claim and drops its copy *without*
  ack (the holder acks), or sees ``done`` and drops *and* acks it. A live replica
  renews its claims every ``lease / 3`` while the handler runs, so a long turn keeps its
  claim; a crashed replica's claim expires after ``lease`` and the next replay runs it.
- **commit**: ``SET key done PX ttl``: time-bounded rather than count-bounded, since
  many relays share it. **release** (handler failed or was cancelled): ``DEL`` if still
  ours.

Everything queued at one moment (claims, commits, releases, renewals) goes out from one
task as *one* script call: a delivery costs one round trip before its handler (its
claim), shared with every other delivery starting then, and its commit rides along with
a later round, written behind the ack like the SQLite store's. One call rather than a
pipeline of one command per key: coredis spends far more CPU per command than Redis
does, and that, not the network, bounded the throughput.

Fail open. A round trip that fails or takes longer than ``timeout`` starts an *outage*:
logged once (WARNING), counted in ``stats.dedupe_store_outages``; from then on claims are
answered "new" at once (counted in ``stats.dedupe_store_fail_open``: a repeat beats a
lost message) and commits are kept (the newest ``capacity``) until a ``PING`` every
``timeout`` or so answers; then the kept commits are written and the end of the
outage is logged. coredis reconnects by itself.

Secrets: the password (from the URL, percent-decoded, or in a client you built) never
appears in a log line, a ``repr`` or an error of ours: the URL is shown with it masked,
and errors by type and the server's address only.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import trio

from ..._core.dedupe import Claim
from ..._core.dedupe_store import DedupeSession
from ..._core.extras import install_hint
from ..._core.stats import RelayStats

__all__ = ["RedisDedupeStore"]

logger = logging.getLogger("trio_relay")

# One call per round, whatever it carries (see the module docstring). ARGV: token,
# lease ms, ttl ms, then how many KEYS are claims, commits, releases; the rest of KEYS
# are renewals. Returns one code per claim: 0 = ours now, 1 = done, 2 = held by another
# replica.
_ROUND = """
local token, lease, ttl = ARGV[1], ARGV[2], ARGV[3]
local n_claim, n_commit, n_release = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local answers = {}
for i = 1, n_claim do
  local held = redis.call('GET', KEYS[i])
  if not held then
    redis.call('SET', KEYS[i], token, 'PX', lease)
    answers[i] = 0
  elseif held == 'done' then
    answers[i] = 1
  else
    answers[i] = 2
  end
end
local j = n_claim
for i = j + 1, j + n_commit do redis.call('SET', KEYS[i], 'done', 'PX', ttl) end
j = j + n_commit
for i = j + 1, j + n_release do
  if redis.call('GET', KEYS[i]) == token then redis.call('DEL', KEYS[i]) end
end
j = j + n_release
for i = j + 1, #KEYS do
  if redis.call('GET', KEYS[i]) == token then redis.call('PEXPIRE', KEYS[i], lease) end
end
return answers
"""


def masked_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class RedisDedupeStore:
    """Handled-delivery keys in Redis (or Valkey), shared by replicas and hosts.

    ``url``: ``redis://[user[:password]@]host[:port][/db]``, ``rediss://`` for TLS, or
    ``unix://``; percent-encoded user and password are decoded. ``prefix`` starts every
    key (the gateway id follows it). ``lease``: seconds a claim lives without renewal
    (how long a crashed replica's delivery waits before another replica may run it).
    ``ttl``: seconds a handled key is remembered (default 24 h). ``timeout``: the bound
    on one round trip before the store is taken to be down (fail open).
    Needs the ``redis`` extra (``coredis``).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "trio_relay:dedupe:",
        lease: float = 30.0,
        ttl: float = 24 * 3600.0,
        timeout: float = 0.5,
    ) -> None:
        scheme = urlsplit(url).scheme
        if scheme not in ("redis", "rediss", "unix"):
            raise ValueError(
                f"RedisDedupeStore needs a redis://, rediss:// or unix:// URL, got "
                f"{masked_url(url)!r}"
            )
        self._url: str | None = url
        self._client: Any = None
        password = urlsplit(url).password
        self._password = unquote(password) if password else None
        self._where = masked_url(url)
        self._check(prefix, lease, ttl, timeout)

    @classmethod
    def from_client(
        cls,
        client: Any,
        *,
        prefix: str = "trio_relay:dedupe:",
        lease: float = 30.0,
        ttl: float = 24 * 3600.0,
        timeout: float = 0.5,
    ) -> RedisDedupeStore:
        """A store on a ``coredis`` client you built (cluster, Sentinel, your own TLS
        and credentials). The relay enters it (``async with client``) while it runs."""
        store = cls.__new__(cls)
        store._url = None
        store._client = client
        store._password = None  # the client's own: never read, never shown
        store._where = type(client).__name__
        store._check(prefix, lease, ttl, timeout)
        return store

    def _check(self, prefix: str, lease: float, ttl: float, timeout: float) -> None:
        for name, value in (("lease", lease), ("ttl", ttl), ("timeout", timeout)):
            if not value > 0:
                raise ValueError(f"RedisDedupeStore {name} must be positive, got {value!r}")
        if timeout >= lease:
            raise ValueError("RedisDedupeStore timeout must be shorter than the lease")
        self.prefix, self.lease, self.ttl, self.timeout = prefix, lease, ttl, timeout

    def __repr__(self) -> str:
        return f"RedisDedupeStore({self._where!r}, prefix={self.prefix!r})"

    def _make_client(self) -> Any:
        if self._client is not None:
            return self._client
        try:
            import coredis
        except ImportError as exc:
            raise RuntimeError(
                f"RedisDedupeStore needs coredis: {install_hint('redis')}"
            ) from exc
        from coredis.retry import NoRetryPolicy

        assert self._url is not None
        # No retries inside coredis: one bounded attempt, then we fail open.
        return coredis.Redis.from_url(
            self._url,
            decode_components=True,
            stream_timeout=self.timeout,
            connect_timeout=self.timeout,
            retry_policy=NoRetryPolicy(),
        )

    def open(
        self, *, namespace: str, capacity: int, stats: RelayStats
    ) -> AbstractAsyncContextManager[DedupeSession]:
        return self._session(namespace, capacity, stats)

    @asynccontextmanager
    async def _session(
        self, namespace: str, capacity: int, stats: RelayStats
    ) -> AsyncIterator[DedupeSession]:
        client = self._make_client()
        keyspace = f"{self.prefix}{{gw:{namespace}}}:"
        session = _RedisSession(self, client, keyspace, capacity, stats)
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            yield session
            nursery.cancel_scope.cancel()


@dataclass(eq=False)
class _PendingClaim:
    key: str
    done: trio.Event = field(default_factory=trio.Event)
    answer: Claim = Claim.NEW


class _RedisSession:
    def __init__(
        self, store: RedisDedupeStore, client: Any, keyspace: str, capacity: int,
        stats: RelayStats,
    ) -> None:
        self._store = store
        self._client = client
        self._keyspace = keyspace
        self._stats = stats
        self._token = f"claim:{secrets.token_hex(8)}".encode()
        self._lease_ms = max(1, int(store.lease * 1000))
        self._ttl_ms = max(1, int(store.ttl * 1000))
        self._claims: list[_PendingClaim] = []
        self._commits: deque[str] = deque(maxlen=capacity)
        self._releases: list[str] = []
        self._held: set[str] = set()  # claimed by us in Redis, renewed until settled
        self._wakeup = trio.Event()
        self._down_since: float | None = None
        self._script = client.register_script(_ROUND)

    async def load_recent(self) -> list[str]:
        return []  # time-bounded and shared: asked per delivery instead

    async def claim(self, key: str) -> Claim:
        if self._down_since is not None:
            self._stats.dedupe_store_fail_open += 1
            return Claim.NEW
        pending = _PendingClaim(key)
        self._claims.append(pending)
        self._wakeup.set()
        await pending.done.wait()
        return pending.answer

    def commit(self, key: str) -> None:
        self._held.discard(key)
        self._commits.append(key)
        self._wakeup.set()

    def release(self, key: str) -> None:
        if key in self._held:
            self._held.discard(key)
            self._releases.append(key)
            self._wakeup.set()

    async def run(self) -> None:
        """Send what is queued (one script call per round), renew claims every
        ``lease / 3``; in an outage, probe every ``timeout`` or so instead."""
        renew_every = self._store.lease / 3
        next_renewal = trio.current_time() + renew_every
        try:
            while True:
                with trio.move_on_at(next_renewal):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                renew = trio.current_time() >= next_renewal
                if renew:
                    next_renewal = trio.current_time() + renew_every
                if self._down_since is not None:
                    await self._probe()
                else:
                    await self._round(renew)
        finally:
            for pending in self._claims:  # closing: whoever waits gets "new" at once
                pending.done.set()

    async def _round(self, renew: bool) -> None:
        claims, self._claims = self._claims, []
        commits, self._commits = list(self._commits), deque(maxlen=self._commits.maxlen)
        releases, self._releases = self._releases, []
        held = list(self._held) if renew else []
        if not (claims or commits or releases or held):
            return
        keys = [self._keyspace + k for k in [*(p.key for p in claims), *commits, *releases, *held]]
        counts = [len(claims), len(commits), len(releases)]
        answers: list[int] = []
        ok = False
        with trio.move_on_after(self._store.timeout):
            try:
                reply = await self._script(
                    keys=keys, args=[self._token, self._lease_ms, self._ttl_ms, *counts]
                )
                answers = [int(a) for a in reply]
                ok = True
            except Exception as exc:
                self._outage(exc)
        if not ok:
            if self._down_since is None:
                self._outage(None)
            # Kept for the store's return. This round's commits are older than any
            # queued while it was in flight, so they go first: a full queue then drops
            # the oldest, keeping the newest ``capacity``. Its releases are kept too,
            # or other replicas would see those claims in progress until the lease ends.
            self._commits = deque([*commits, *self._commits], maxlen=self._commits.maxlen)
            self._releases[:0] = releases
            self._wakeup.set()  # probing starts now (not at the next renewal), every timeout
            # Claims queued while this round was in flight saw the store up, so they
            # wait in ``_claims``; from now on run() only probes, and they would wait
            # for the end of the outage. They fail open now, with this round's own.
            late, self._claims = self._claims, []
            for p in (*claims, *late):
                self._stats.dedupe_store_fail_open += 1
                p.done.set()
            return
        for p, code in zip(claims, answers, strict=True):
            if code == 0:
                self._held.add(p.key)
            else:
                p.answer = Claim.DONE if code == 1 else Claim.IN_PROGRESS
            p.done.set()

    def _outage(self, exc: BaseException | None) -> None:
        if self._down_since is not None:
            return
        self._down_since = trio.current_time()  # Trio's clock: MockClock in tests
        self._stats.dedupe_store_outages += 1
        if exc is None:
            cause = f"no answer within {self._store.timeout:g} s"
        else:
            cause = _describe(exc, self._store._password)
        logger.warning(
            "inbound: dedupe store %s unavailable (%s): deliveries run without "
            "cross-replica dedupe until it is back (fail open)",
            self._store._where, cause, extra={"cause": cause},
        )

    async def _probe(self) -> None:
        with trio.move_on_after(self._store.timeout):
            try:
                await self._client.ping()
            except Exception:
                pass
            else:
                assert self._down_since is not None
                down_for = trio.current_time() - self._down_since
                self._down_since = None
                logger.warning(
                    "inbound: dedupe store %s reachable again after %.1f s",
                    self._store._where, down_for,
                )
                self._wakeup.set()  # write the kept commits now
                return
        await trio.sleep(min(self._store.timeout, 1.0))
        self._wakeup.set()


def _describe(exc: BaseException, password: str | None) -> str:
    # The type and coredis's own message, which names host and port; a password is
    # masked should a message ever echo it. Shortened: it is logged once per outage.
    text = str(exc)
    if password:
        text = text.replace(password, "***")
    return f"{type(exc).__name__}: {text[:200]}"
