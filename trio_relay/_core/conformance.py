"""The clauses ``trio-relay conformance`` checks a connector against, and its report.

Each [`Clause`][trio_relay.conformance.Clause] names one promise of docs/protocol.md,
the section that makes it, and the clauses it can only be judged after (a connector that
refuses every token cannot be said to refuse a bad one; a result that cannot be matched
to its request says nothing of its shape). A check ends each clause with a
[`Verdict`][trio_relay.conformance.Verdict]: passed, failed (what was seen, against what
the contract says) or skipped (why). The
[`Report`][trio_relay.conformance.Report] renders them one line each, with a summary
line, and as JSON for CI.

Sans-I/O: plain data and text; the checks that talk to a connector are in
``trio_relay/_trio/conformance/``.
"""

from __future__ import annotations

import enum
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLAUSES", "Clause", "Report", "Status", "Verdict", "clause"]

PROTOCOL_PAGE = "docs/protocol.md"


@dataclass(frozen=True, slots=True)
class Clause:
    """One promise of the protocol a connector makes, checked on its own."""

    id: str
    """Stable, for ``--only`` and the JSON report (``upgrade.refuses``)."""
    title: str
    """What a conforming connector does, in one line."""
    section: str
    """The heading of docs/protocol.md that makes the promise."""
    requires: tuple[str, ...] = ()
    """Clauses that must not have failed or been skipped for this one to be judged."""

    @property
    def link(self) -> str:
        """The section's address: ``docs/protocol.md#going-idle``."""
        anchor = "-".join(self.section.lower().replace(",", "").split())
        return f"{PROTOCOL_PAGE}#{anchor}"


_AUTH = "Upgrade authentication"
_TO_GATEWAY = "Frames, connector to gateway"

CLAUSES: tuple[Clause, ...] = (
    Clause(
        "upgrade.accepts",
        "a fresh token for the gateway id is accepted, and each hello answered",
        _AUTH,
    ),
    Clause(
        "upgrade.refuses",
        "a token signed with another secret, and an upgrade without one, are refused",
        _AUTH,
        ("upgrade.accepts",),
    ),
    Clause(
        "upgrade.expired",
        "an expired token is refused with the reason 'expired'",
        _AUTH,
        ("upgrade.accepts",),
    ),
    Clause(
        "close.codes",
        "a refusal is a close frame with code 4401, before any frame",
        "Close codes",
        ("upgrade.accepts",),
    ),
    Clause(
        "hello.descriptor",
        "one descriptor per hello, for its platform, with every required field and type",
        "Descriptor",
        ("upgrade.accepts",),
    ),
    Clause(
        "results.request-ids",
        "each outbound is answered by one outbound_result with its requestId, and no "
        "result names an id never sent",
        _TO_GATEWAY,
        ("upgrade.accepts",),
    ),
    Clause(
        "ops.results",
        "each advertised op answers with a result of the contract's shape",
        "Outbound actions",
        ("upgrade.accepts", "results.request-ids"),
    ),
    Clause(
        "ping",
        "a WebSocket ping is answered with its pong",
        "Timings",
        ("upgrade.accepts",),
    ),
    Clause(
        "idle.ack",
        "going_idle is answered with going_idle_ack",
        "Going idle",
        ("upgrade.accepts",),
    ),
    Clause(
        "idle.buffers",
        "after the going_idle_ack a message is buffered, not sent live, and replayed "
        "on the next handshake",
        "Going idle",
        ("upgrade.accepts", "idle.ack"),
    ),
    Clause(
        "delivery.redelivers",
        "a buffered delivery not acked is replayed on the next handshake",
        _TO_GATEWAY,
        ("upgrade.accepts",),
    ),
    Clause(
        "delivery.acked",
        "a buffered delivery that was acked is not replayed",
        _TO_GATEWAY,
        ("upgrade.accepts",),
    ),
    Clause(
        "drafts.seal",
        "a seal sent again returns the same message_id (the seal's tombstone)",
        "Live cards",
        ("upgrade.accepts", "results.request-ids", "ops.results"),
    ),
    Clause(
        "idempotency.keys",
        "an idempotency_key repeated within the window is answered with the first "
        "result and replayed: true, and a repeat with another action is refused",
        "Idempotency keys",
        ("upgrade.accepts", "results.request-ids", "ops.results"),
    ),
)
"""Every clause, in the order the check judges them."""

_BY_ID: Mapping[str, Clause] = {c.id: c for c in CLAUSES}


def clause(clause_id: str) -> Clause:
    """The clause named ``clause_id``; ``KeyError`` listing the known ones otherwise."""
    try:
        return _BY_ID[clause_id]
    except KeyError:
        raise KeyError(f"no clause {clause_id!r}; the clauses are: {', '.join(_BY_ID)}") from None


class Status(enum.Enum):
    PASSED = "pass"
    FAILED = "fail"
    SKIPPED = "skip"


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one clause came out. ``seen`` and ``expected`` are set for a failure (what
    the connector did, what the contract says); ``detail`` says what was checked (a
    pass), or why nothing was (a skip)."""

    clause: Clause
    status: Status
    detail: str = ""
    seen: str | None = None
    expected: str | None = None

    @classmethod
    def passed(cls, clause_id: str, detail: str = "") -> Verdict:
        return cls(clause(clause_id), Status.PASSED, detail)

    @classmethod
    def failed(cls, clause_id: str, seen: str, expected: str) -> Verdict:
        return cls(clause(clause_id), Status.FAILED, seen=seen, expected=expected)

    @classmethod
    def skipped(cls, clause_id: str, reason: str) -> Verdict:
        return cls(clause(clause_id), Status.SKIPPED, reason)

    def line(self) -> str:
        """The report's line for this clause, wrapped to ``REPORT_WIDTH`` columns (a
        continuation indented under its first line)."""
        head = f"{self.status.value.upper():<4} {self.clause.id}"
        if self.status is Status.FAILED:
            return "\n".join(
                [
                    _wrap(f"{head}: {self.clause.title}", "     "),
                    _wrap(f"     seen: {self.seen}", "           "),
                    _wrap(f"     contract: {self.expected} ({self.clause.link})", "           "),
                ]
            )
        if self.status is Status.SKIPPED:
            return _wrap(f"{head}: {self.detail}", "     ")
        return _wrap(f"{head}: {self.detail or self.clause.title}", "     ")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "clause": self.clause.id,
            "status": self.status.value,
            "title": self.clause.title,
            "section": self.clause.link,
        }
        if self.status is Status.FAILED:
            data["seen"] = self.seen
            data["expected"] = self.expected
        else:
            data["detail"] = self.detail
        return data


@dataclass(slots=True)
class Report:
    """The verdicts of one run, in clause order; ``target`` is the URL checked (its
    host and port: never a credential)."""

    target: str
    verdicts: list[Verdict] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)

    def get(self, clause_id: str) -> Verdict | None:
        for verdict in self.verdicts:
            if verdict.clause.id == clause_id:
                return verdict
        return None

    def blocker(self, required: Iterable[str]) -> Verdict | None:
        """The first of ``required`` that did not pass (so a clause that needs it cannot
        be judged), or ``None``. A clause not part of this run (``--only``) blocks
        nothing."""
        for clause_id in required:
            verdict = self.get(clause_id)
            if verdict is not None and verdict.status is not Status.PASSED:
                return verdict
        return None

    def count(self, status: Status) -> int:
        return sum(1 for v in self.verdicts if v.status is status)

    @property
    def ok(self) -> bool:
        """Nothing failed (skips are not failures)."""
        return self.count(Status.FAILED) == 0

    def summary(self) -> str:
        passed, failed, skipped = (self.count(s) for s in Status)
        outcome = "no clause failed" if self.ok else f"{failed} of them failed"
        return (
            f"{self.target}: {len(self.verdicts)} clauses, {passed} passed, {failed} "
            f"failed, {skipped} skipped: {outcome}"
        )

    def lines(self) -> list[str]:
        return [v.line() for v in self.verdicts] + [self.summary()]

    def to_json(self) -> dict[str, Any]:
        passed, failed, skipped = (self.count(s) for s in Status)
        return {
            "target": self.target,
            "ok": self.ok,
            "passed": passed,
            "failed": failed,
            "skipped": skipped,
            "clauses": [v.to_json() for v in self.verdicts],
        }


REPORT_WIDTH = 100
"""Columns a report line takes at most: a terminal's, a CI log's and the docs' width."""


def _wrap(text: str, indent: str) -> str:
    # Words (and links) are never split, so a section link stays whole and clickable.
    return textwrap.fill(
        text,
        REPORT_WIDTH,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
