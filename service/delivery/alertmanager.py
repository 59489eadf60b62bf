"""Alertmanager webhook payloads (version 4) and their HMAC-SHA256 signature.

The body is the JSON document Alertmanager's webhook receiver sends, so any tool that reads
Alertmanager webhooks reads ours. Each moltscope alert becomes one Alertmanager alert:
``labels`` = alertname ``moltscope_<type>``, type, severity, key and the detector's labels;
``annotations`` (strings, as Alertmanager requires) = summary, ``description`` (the same
summary a person reads on the page, as plain text lines: the summary, the exemplar texts with
their agents and times, the near-duplicate clusters, who led and who followed, the link),
``exemplars`` (one line per exemplar), ``link`` (the incident's view on the live page), state
(firing | updated | resolved), sequence, updated_at, incident_id and the whole evidence as JSON
text. ``generatorURL`` is that view on the live page too (Alertmanager's "source" link);
``externalURL`` and the links are absolute when the dispatcher knows the service's external
URL (``MOLTSCOPE_DELIVERY__EXTERNAL_URL``), else paths from the API's root.

Signature: header ``X-Moltscope-Signature: sha256=<hex>``, HMAC-SHA256 of the exact body bytes
with the webhook's secret (as GitHub signs its webhooks). ``X-Moltscope-Delivery`` carries a
delivery id that is the same on every retry, so a receiver can drop duplicates (delivery is
at-least-once).

>>> sign(b'{"version":"4"}', "s3cret")
'sha256=afa6c091d9d41c83d3deb28420d4e0e40b2c2d4c81a8a9f4364255fe6a69f15a'
>>> verify(b'{"version":"4"}', "s3cret", sign(b'{"version":"4"}', "s3cret"))
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

from detectors.alert import Alert, page_link

SIGNATURE_HEADER = "X-Moltscope-Signature"
DELIVERY_HEADER = "X-Moltscope-Delivery"
ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert still firing
MAX_EVIDENCE_CHARS = 16_000


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(body: bytes, secret: str, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(sign(body, secret), header)


def _rfc3339(dt: Any) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(t: Any) -> str:
    """Unix seconds as RFC 3339 UTC to the second."""
    if not isinstance(t, int | float):
        return "?"
    return _rfc3339(datetime.fromtimestamp(t, UTC).replace(microsecond=0))


def _one_line(text: Any, chars: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def exemplar_lines(evidence: dict[str, Any]) -> list[str]:
    """One line per exemplar: agent, time, item id and text."""
    return [f'{x.get("agent") or "(unknown)"} at {_time(x.get("t"))} ({x.get("id")}): '
            f'{_one_line(x.get("text", ""))}' for x in evidence.get("exemplars") or []
            if isinstance(x, dict)]


def describe(alert: Alert, link: str) -> str:
    """What a person needs to act, as plain text: summary, exemplars, near-duplicate clusters,
    who led and who followed, and where to look (:mod:`detectors.evidence` names the keys)."""
    ev = alert.evidence
    lines = [alert.summary]
    exemplars = exemplar_lines(ev)
    if exemplars:
        lines += ["", "Exemplars:", *(f"- {x}" for x in exemplars)]
    clusters = [c for c in ev.get("clusters") or [] if isinstance(c, dict)]
    if clusters:
        lines += ["", f"Near-duplicate clusters (word-set Jaccard >= "
                      f"{ev.get('cluster_jaccard')}):"]
        lines += [f'- {c.get("size")} texts by {c.get("agents")} agents: '
                  f'{_one_line(c.get("text", ""), 120)}' for c in clusters]
    tl = ev.get("timeline")
    if isinstance(tl, dict) and tl.get("entries"):
        n, n_lead = int(tl.get("agents", 0)), int(tl.get("leaders", 0))
        leaders = [e["agent"] for e in tl["entries"] if e.get("role") == "leader"][:10]
        followers = [e for e in tl["entries"] if e.get("role") == "follower"][:10]
        more = f" and {n_lead - len(leaders)} more" if n_lead > len(leaders) else ""
        lines += ["", f"Timeline: {n} agents from {_time(tl.get('start'))}; "
                      f"led by {', '.join(leaders)}{more}"]
        if followers:
            more = f" and {n - n_lead - len(followers)} more" if n - n_lead > len(followers) \
                else ""
            lines.append("followed by " + ", ".join(
                f'{e["agent"]} (+{round(e["delay_s"], 1):g} s)' for e in followers) + more)
    lines += ["", f"View: {link}"]
    return "\n".join(lines)


def am_alert(alert: Alert, external_url: str = "") -> dict[str, Any]:
    evidence = json.dumps(alert.evidence, default=str, separators=(",", ":"))
    if len(evidence) > MAX_EVIDENCE_CHARS:
        evidence = evidence[:MAX_EVIDENCE_CHARS] + "...(truncated)"
    labels = {**alert.labels, "alertname": f"moltscope_{alert.type}", "type": alert.type,
              "severity": alert.severity, "key": alert.key}
    link = external_url.rstrip("/") + alert.evidence.get("link", page_link(alert.fingerprint,
                                                                         alert.starts_at))
    return {
        "status": "resolved" if alert.state == "resolved" else "firing",
        "labels": labels,
        "annotations": {"summary": alert.summary, "description": describe(alert, link),
                        "exemplars": "\n".join(exemplar_lines(alert.evidence)), "link": link,
                        "state": alert.state,
                        "sequence": str(alert.sequence), "updated_at": _rfc3339(alert.updated_at),
                        "incident_id": alert.incident_id, "evidence": evidence},
        "startsAt": _rfc3339(alert.starts_at),
        "endsAt": _rfc3339(alert.ends_at) if alert.ends_at else ZERO_TIME,
        "generatorURL": link,
        "fingerprint": alert.fingerprint,
    }


def _common(dicts: list[dict[str, str]]) -> dict[str, str]:
    if not dicts:
        return {}
    return {k: v for k, v in dicts[0].items() if all(d.get(k) == v for d in dicts[1:])}


def payload(alerts: list[Alert], *, receiver: str, group_labels: dict[str, str],
            external_url: str = "", truncated: int = 0) -> dict[str, Any]:
    """One webhook message for a group of alerts (Alertmanager webhook format, version 4)."""
    items = [am_alert(a, external_url) for a in alerts]
    group_key = "{}:{" + ",".join(f'{k}="{v}"' for k, v in sorted(group_labels.items())) + "}"
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": truncated,
        "status": "firing" if any(i["status"] == "firing" for i in items) else "resolved",
        "receiver": receiver,
        "groupLabels": group_labels,
        "commonLabels": _common([i["labels"] for i in items]),
        "commonAnnotations": _common([{k: v for k, v in i["annotations"].items()
                                       if k == "summary"} for i in items]),
        "externalURL": external_url,
        "alerts": items,
    }


def encode(body: dict[str, Any]) -> bytes:
    """The exact bytes that are signed and sent."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
