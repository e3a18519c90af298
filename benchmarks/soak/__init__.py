"""Chaos soak: many requesters and a stream of buffered deliveries against a connector
that misbehaves at random, then a check of every promise the relay makes.

``trio-relay soak --seconds N`` runs it (:func:`.cli.main`); ``run_soak`` is the same as a
function. The relay and the in-process reference connector share one ``trio.run`` on
loopback: it is a correctness soak, not a benchmark.

What runs, for ``seconds`` of wall time:

- ``requesters`` tasks, each sending ``send`` actions one after another with a random
  timeout (some with ``wait_connected=True``), a short random pause between them;
- bursts of hundreds of 30 kB requests at once, at random and whenever the connector
  falls silent, so that the writer is blocked mid-batch while requests give up;
- a producer buffering user messages on the connector (``buffer_inbound``), which
  delivers each at once if a session is up and replays every unacknowledged one on each
  handshake; the relay's handler sometimes fails a first attempt on purpose;
- a fault injector that, at random moments, resets the TCP connection, closes with
  1011 or 1001, drops TCP without a close frame (the gateway sees 1006), falls silent
  (no bytes, no pongs) for a while, refuses the next upgrades (4401 before the
  handshake, 1013), delays results, or stops the connector and restarts it.

The relay authenticates with an upgrade secret, so every dial mints a token that the
connector verifies.

Then the faults stop, the backlog of deliveries is drained (forcing a replay if one is
still unacknowledged), the relay is closed, and the invariants are checked:

1. every request returned exactly one outcome, none later than its deadline
   (``DEADLINE_SLACK`` of scheduling slack allowed);
2. no definite failure for a request the connector received, or whose frame was
   written; no success the connector did not answer (and every answer reached the
   request it belongs to); ambiguous only where the frame was handed to the socket;
3. every buffered delivery handled exactly once, and acknowledged;
4. file descriptors and tasks back to their starting level once the relay closed; none
   of the relay's per-connection objects (connections, waiters, transports, client
   WebSockets) still alive; resident memory within ``memory_tolerance`` of where it
   started;
5. nothing logged at ERROR or above, and real progress made (requests succeeded,
   deliveries handled).

How the harness knows what it checks (:mod:`.ledger`): every action carries a unique ``nonce``. The
connector's outbound handler marks a nonce *received* when the frame arrives and
*answered* when it returns a result (``message_id`` ``m-<nonce>``, checked against the
outcome). The client side's ``WebSocketConnection.send_message`` is wrapped for the run's
duration (client connections only; the connector's sends pass through untouched): a
nonce is *handed to the socket* when a message carrying its frame is passed to it, and
*written* once that call returned. So a definite failure must be neither received nor
written (a frame whose message was still being written when its request gave up may yet
arrive: that is ambiguous), and an ambiguous one must at least have been handed to the
socket. Two bytes of flags per request keep a ten-minute run's bookkeeping small.

The package, one concept a module: :mod:`.settings` (the relay's configuration and the
slack of each check), :mod:`.state` (what one run shares), :mod:`.ledger` (flags per
request), :mod:`.actors` (requesters, bursts, the producer, the handlers),
:mod:`.faults` (the table of faults and the injector), :mod:`.observe` (the error log
and the write tap), :mod:`.invariants` (the verdicts), :mod:`.report` (the table),
:mod:`.run` (one run) and :mod:`.cli` (``trio-relay soak``).
"""

from __future__ import annotations

from .cli import main
from .faults import FAULTS
from .report import Invariant, SoakReport
from .run import run_soak
from .settings import soak_config

__all__ = ["FAULTS", "Invariant", "SoakReport", "main", "run_soak", "soak_config"]
