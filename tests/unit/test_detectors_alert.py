"""The alert lifecycle: one incident fires once, escalates as updates, resolves, re-opens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from detectors.alert import Alert, AlertBook, Finding, fingerprint

T0 = datetime(2026, 2, 8, 8, 0, tzinfo=UTC)


def at(s: float) -> float:
    return T0.timestamp() + s


def dt(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def f(key: str = "token:CLAW", severity: str = "warning", score: float = 10.0) -> Finding:
    return Finding("surge", key, severity, f"surge {key}", {"posts": score}, score=score)


def test_fingerprint_is_stable_and_distinct() -> None:
    assert fingerprint("surge", "token:CLAW") == fingerprint("surge", "token:CLAW")
    assert len({fingerprint("surge", "token:CLAW"), fingerprint("burst", "token:CLAW"),
                fingerprint("surge", "token:GPT")}) == 3
    assert fingerprint("surge", "token:CLAW") == "c5bc81277148a7eb"  # sha256, not hash()


def test_lifecycle_firing_updated_resolved() -> None:
    book = AlertBook(resolve_after_s=300, update_min_interval_s=60, update_score_ratio=1.5)
    [a] = book.reconcile(at(0), "surge", [f()])
    assert (a.state, a.sequence, a.starts_at, a.ends_at) == ("firing", 1, dt(0), None)
    assert book.reconcile(at(10), "surge", [f(score=12)]) == []  # grew, but not enough
    assert book.reconcile(at(20), "surge", [f(score=30)]) == []  # enough, but too soon
    [u] = book.reconcile(at(70), "surge", [f(score=30)])
    assert (u.state, u.sequence, u.starts_at) == ("updated", 2, dt(0))
    [c] = book.reconcile(at(80), "surge", [f(severity="critical", score=30)])
    assert (c.state, c.severity) == ("updated", "critical")  # escalation is immediate
    assert book.reconcile(at(300), "surge", []) == []  # gone for 220 s < 300 s
    [r] = book.reconcile(at(400), "surge", [])
    assert (r.state, r.ends_at, r.sequence, r.fingerprint) == ("resolved", dt(80), 4,
                                                               a.fingerprint)
    assert book.firing() == []
    assert [(i.state, i.incident_id) for i in book.incidents()] == [("resolved",
                                                                     a.incident_id)]
    # every transition links the incident's view on the page, and keeps the detector's evidence
    assert {x.evidence["link"] for x in (a, u, c, r)} == {f"/#alert-{a.incident_id}"}
    assert r.evidence["posts"] == 30


def test_detector_types_do_not_resolve_each_other() -> None:
    book = AlertBook(resolve_after_s=0)
    book.reconcile(at(0), "surge", [f()])
    assert book.reconcile(at(10), "burst", []) == []
    assert [a.type for a in book.firing()] == ["surge"]


def test_comeback_within_cooldown_reopens_instead_of_firing_again() -> None:
    book = AlertBook(resolve_after_s=60, cooldown_s=3600)
    book.reconcile(at(0), "surge", [f()])
    book.reconcile(at(100), "surge", [])
    [again] = book.reconcile(at(1000), "surge", [f()])
    assert (again.state, again.starts_at, again.sequence) == ("updated", dt(0), 3)
    assert again.evidence["link"] == f"/#alert-{again.incident_id}"  # the one incident's view
    assert book.fired_total == {("surge", "warning"): 1}
    assert len(book.incidents()) == 1
    book.reconcile(at(1100), "surge", [])
    [new] = book.reconcile(at(1100 + 7200), "surge", [f()])  # after the cool-down: new incident
    assert (new.state, new.starts_at) == ("firing", dt(8300))
    assert book.fired_total == {("surge", "warning"): 2}
    assert len(book.incidents()) == 2


def test_samples_and_json_round_trip() -> None:
    book = AlertBook()
    book.reconcile(at(0), "surge", [f(), f("token:GPT", "critical")])
    samples = {(s.name, s.labels): (s.value, s.kind) for s in book.samples()}
    assert samples == {
        ("alerts_firing", (("type", "surge"),)): (2.0, "gauge"),
        ("alerts_total", (("severity", "critical"), ("type", "surge"))): (1.0, "counter"),
        ("alerts_total", (("severity", "warning"), ("type", "surge"))): (1.0, "counter")}
    a = book.firing()[0]
    assert Alert.model_validate_json(a.model_dump_json()) == a
