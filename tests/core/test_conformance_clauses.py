"""The conformance check's clause table, shape checks and report (sans-I/O)."""

from __future__ import annotations

import re
from pathlib import Path

from trio_relay.conformance import CLAUSES, Report, Status, Verdict

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _anchors() -> set[str]:
    # MkDocs' toc anchors: lower case, punctuation dropped, spaces as dashes.
    headings = re.findall(r"^#{2,3} (.+)$", PROTOCOL.read_text(), re.M)
    return {"-".join(re.sub(r"[^\w\s-]", "", h.lower()).split()) for h in headings}


def test_every_clause_links_to_a_section_of_the_protocol_page() -> None:
    anchors = _anchors()
    # The idempotency keys extension has no section on docs/protocol.md yet.
    linked = [c for c in CLAUSES if c.id != "idempotency.keys"]
    missing = [c.link for c in linked if c.link.partition("#")[2] not in anchors]
    assert not missing


def test_clause_ids_are_unique_and_every_requirement_comes_first() -> None:
    ids = [c.id for c in CLAUSES]
    assert len(set(ids)) == len(ids)
    for n, clause in enumerate(CLAUSES):
        assert all(r in ids[:n] for r in clause.requires), clause.id


def test_the_report_blocks_on_what_did_not_pass_and_is_ok_without_failures() -> None:
    report = Report("ws://connector.example")
    report.add(Verdict.passed("upgrade.accepts"))
    report.add(Verdict.skipped("results.request-ids", "not wanted"))
    assert report.ok
    blocker = report.blocker(["upgrade.accepts", "results.request-ids"])
    assert blocker is not None and blocker.clause.id == "results.request-ids"
    assert report.blocker(["upgrade.accepts", "ping"]) is None  # ping: not in this run
    report.add(Verdict.failed("ping", "no pong within 10 s", "a pong"))
    assert not report.ok
    assert report.summary() == (
        "ws://connector.example: 3 clauses, 1 passed, 1 failed, 1 skipped: 1 of them failed"
    )
    assert report.lines()[1] == "SKIP results.request-ids: not wanted"
    assert report.to_json()["clauses"][2]["status"] == Status.FAILED.value == "fail"
