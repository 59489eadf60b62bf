"""Socialisation onset: agents start adapting to feedback, or converging on peers' content.

The published finding (metrics.md A2) is that Moltbook agents do neither; this detector says
when that stops being true. It runs where the per-agent figures meet, in the reducer, on the
merged population snapshots of :class:`~streams.state.feedback.FeedbackEngine` and
:class:`~streams.state.impact.ImpactEngine` (``observe(t, snapshot)``: the ``feedback`` and
``impact`` details of ``Snapshot.merge`` of their ``population(...)``), and judges the latest
one at each ``findings(now)``:

- **adapting** (key ``adapting``): k of the N agents with a scored window pair have their Net
  Progress above their own shuffle null's band. If agents ignore feedback each is above with
  probability ``null_share`` = (1 - band) / 2 = 0.025, so k ~ Binomial(N, 0.025); the null
  band's top is the binomial ``1 - alpha`` quantile (``alpha`` = 0.001, one-sided), and the
  finding fires when k exceeds it (N >= ``min_agents``, 30). Critical when the binomial tail
  probability of k is below ``alpha ** 2``.
- **converging** (key ``converging``): the mean interaction-impact delta of the window's
  events exceeds the same-day baseline's mean by ``z_min`` (3.09, one-sided 0.001) standard
  errors of the events' mean and by at least ``min_effect`` (0.01 of cosine), over at least
  ``min_events`` (100) events. Critical at twice ``z_min``.

Each finding's evidence carries the figures, the band, the agent count and the top
contributing agents the partials carry (highest NP above their band; highest mean delta).
Agents' movement toward the society centroid is reported by the drift engine, not judged
here: its null band needs the spread of per-agent movement against the society centroid,
which the per-partition partials do not carry. A snapshot older than ``stale_s`` (1 h) is
not judged (a stalled reducer does not hold an alert open). Memory: the latest figures.

>>> d = SocialisationDetector()
>>> quiet = Snapshot(details={"feedback": {"agents": 400, "above": 9, "top_above": []}})
>>> d.observe(1769904000.0, quiet)
>>> d.findings(1769904000.0)
[]
>>> d.observe(1769904060.0, Snapshot(details={"feedback": {"agents": 400, "above": 40,
...                                                        "top_above": []}}))
>>> [(f.key, f.evidence["band_high"]) for f in d.findings(1769904060.0)]
[('adapting', 21.0)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy.stats import binom

from detectors.alert import Finding, Severity
from streams.state.base import Sample, Snapshot


@dataclass(frozen=True, slots=True)
class SocialisationConfig:
    null_share: float = 0.025
    alpha: float = 1e-3
    min_agents: int = 30
    z_min: float = 3.09
    min_effect: float = 0.01
    min_events: int = 100
    stale_s: float = 3600.0


class SocialisationDetector:
    type = "socialisation"

    def __init__(self, config: SocialisationConfig | None = None) -> None:
        self.cfg = config or SocialisationConfig()
        self._t = -math.inf
        self._feedback: dict[str, Any] | None = None
        self._impact: dict[str, Any] | None = None
        self._judged: dict[str, float] = {}

    def observe(self, t: float, snapshot: Snapshot) -> None:
        """The merged population snapshot of the feedback and impact engines at ``t``."""
        self._t = t
        self._feedback = snapshot.details.get("feedback")
        self._impact = snapshot.details.get("impact")

    def expire(self, now: float) -> None:
        if now - self._t > self.cfg.stale_s:
            self._feedback = self._impact = None

    def findings(self, now: float) -> list[Finding]:
        self.expire(now)
        self._judged = {}
        out = []
        if self._feedback is not None:
            f = self._adapting(self._feedback)
            if f is not None:
                out.append(f)
        if self._impact is not None:
            f = self._converging(self._impact)
            if f is not None:
                out.append(f)
        return out

    def _adapting(self, fb: dict[str, Any]) -> Finding | None:
        cfg = self.cfg
        n, k = int(fb["agents"]), int(fb["above"])
        if n < cfg.min_agents:
            return None
        band = float(binom.isf(cfg.alpha, n, cfg.null_share))
        tail = float(binom.sf(k - 1, n, cfg.null_share))  # P(X >= k) under the null
        self._judged |= {"adapting_agents": k, "adapting_band_high": band}
        if k <= band:
            return None
        severity: Severity = "critical" if tail < cfg.alpha ** 2 else "warning"
        evidence = {"agents": n, "above": k, "share_above": k / n,
                    "expected": n * cfg.null_share, "band_high": band, "tail_probability": tail,
                    "alpha": cfg.alpha, "top_agents": fb.get("top_above", [])}
        return Finding(self.type, "adapting", severity,
                       f"{k} of {n} agents adapt to feedback (NP above their null band); "
                       f"null expects {n * cfg.null_share:.1f}, band up to {band:.0f}",
                       evidence, score=k / max(band, 1.0), labels={"signal": "feedback"})

    def _converging(self, im: dict[str, Any]) -> Finding | None:
        cfg = self.cfg
        n, mean, base, sd = (im.get("events") or 0, im.get("delta_mean"),
                             im.get("baseline_delta_mean"), im.get("delta_sd"))
        if n < cfg.min_events or any(x is None or math.isnan(x) for x in (mean, base, sd)):
            return None
        se = sd / math.sqrt(n)
        effect = mean - base
        z = effect / se if se > 0 else (math.inf if effect > 0 else 0.0)
        self._judged |= {"impact_excess": effect, "impact_z": z}
        if z < cfg.z_min or effect < cfg.min_effect:
            return None
        severity: Severity = "critical" if z >= 2 * cfg.z_min else "warning"
        evidence = {"events": n, "delta_mean": mean, "baseline_delta_mean": base,
                    "excess": effect, "z": z, "standard_error": se,
                    "baseline_events": im.get("baseline_events"),
                    "agents": (im.get("agent_delta") or {}).get("n"),
                    "top_agents": im.get("top", [])}
        return Finding(self.type, "converging", severity,
                       f"Agents' posts move toward what they comment on: delta S {mean:.4f} vs "
                       f"baseline {base:.4f} (z {z:.1f}, {n} events)",
                       evidence, score=z, labels={"signal": "impact"})

    def snapshot(self) -> Snapshot:
        """The figures judged at the last ``findings``: adapting agents and the band's top,
        the impact excess over the baseline and its z."""
        helps = {"adapting_agents": "Agents with NP above their null band (judged)",
                 "adapting_band_high": "Top of the binomial null band of adapting agents",
                 "impact_excess": "Mean impact delta minus the same-day baseline (judged)",
                 "impact_z": "Impact excess in standard errors"}
        return Snapshot([Sample(f"socialisation_{k}", float(v), help=helps[k])
                         for k, v in sorted(self._judged.items())])
