"""Check a live connector against the relay protocol, clause by clause.

The command ``trio-relay conformance URL --gateway-id ID --secret-env VAR`` runs this
check and prints its report (see "Checking a connector" in the docs). From Python, for a
connector's own test suite:

```python
import trio
from trio_relay.conformance import check_connector

report = trio.run(lambda: check_connector(
    "https://connector.example", gateway_id="conformance", secret=secret, chat="C1"
))
print("\\n".join(report.lines()))
assert report.ok, report.summary()
```

The check needs no part of the reference connector (``trio_relay.testing``): it is a
gateway that does everything by the book and watches what the connector answers.
"""

from __future__ import annotations

from ._core.conformance import CLAUSES, Clause, Report, Status, Verdict
from ._trio.conformance.check import WriteMessage, check_connector

__all__ = ["CLAUSES", "Clause", "Report", "Status", "Verdict", "WriteMessage", "check_connector"]
