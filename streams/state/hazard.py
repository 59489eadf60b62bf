"""Cox proportional hazard of cascade adoption per extra exposure (Molt Dynamics: HR 0.53).

Exposure of an agent to a cascade = its in-neighbours in the cumulative interaction graph
(agents who commented on it) that adopted the cascade's n-gram before it (metrics.md B, as
:mod:`streams.state.cascades` computes it). The paper gives one number; its public code
(YCRG-Labs/molt-dynamics, ``rq2_diffusion.py`` ``fit_cox_hazards``) fixes the model, which is
the default here; the other model is the textbook at-risk set, for a figure that reads as a
hazard. Both are fitted with lifelines (Efron ties), on cascades' public state only
(:meth:`CascadeEngine.sizes`, :meth:`~CascadeEngine.adopters`,
:meth:`~CascadeEngine.exposures` and the interaction graph it reads).

- ``model="published"`` (the code's): one subject per adopter of a cascade that is in the
  graph and adopted strictly after the cascade's seed (its first adoption by anyone); duration
  = hours from the seed to its adoption; every subject an event (no censoring, no
  non-adopters); covariate = its exposure at adoption. :class:`lifelines.CoxPHFitter`.
- ``model="time_varying"``: per cascade, the agents of the graph with at least one adopted
  in-neighbour; each is at risk from its first exposure (the first adoption among its
  in-neighbours) to its own adoption (event) or to the analysis time (censored); its exposure
  is a step covariate, one episode per further in-neighbour adoption. An agent that adopted at
  or before its first exposure is not at risk. Fitted in the counting-process form, each
  episode a left-truncated row (:class:`lifelines.CoxPHFitter` with ``entry_col``): the same
  partial likelihood as :class:`lifelines.CoxTimeVaryingFitter` (coefficients within 1e-7,
  tested) at half its cost.

Both read the graph as it stands at the fit (the paper's static graph: an edge formed after an
adoption still counts). Cost per fit, bounded: cascades largest first (ties by n-gram), at
most ``max_cascades``; cascades are added whole while the table stays within the row cap;
when the largest alone is over it, its subjects are sampled (whole, in a fixed hash order of
their names, :func:`sample_subjects`) up to the cap. The sample is deterministic and the
details' ``capped`` says when the cap bit. Building the table costs O(cascades) to list
them (:meth:`CascadeEngine.sizes` names every one) plus O(the chosen adopters and their
out-edges); the fit grows faster than linearly with the rows (hence the caps). Live,
:meth:`HazardEngine.expire` fits every ``every`` of event time (6 h); a replay fits at
:meth:`HazardEngine.fit` (the pipeline's close). State: the last fit's figures (a few
numbers); the table is dropped after each fit.

>>> from datetime import datetime, timezone
>>> from streams.events import CommentEvent, PostEvent
>>> from streams.state.cascades import CascadeConfig, CascadeEngine
>>> t0 = datetime(2026, 2, 1, tzinfo=timezone.utc).timestamp()
>>> def at(h):
...     return datetime.fromtimestamp(t0 + 3600 * h, timezone.utc)
>>> cas = CascadeEngine(CascadeConfig(min_adopters=2))
>>> hz = HazardEngine(cascades=cas)
>>> for i, (who, h) in enumerate([("a", 0), ("b", 1), ("c", 3), ("d", 4), ("e", 9)]):
...     it = Item.of(PostEvent(id=f"post:{i}", event_time=at(h), observed_at=at(h),
...                            post_id=str(i), author=who, title="molt swarm rising"))
...     cas.update(it); hz.update(it)
>>> for i, (src, dst) in enumerate([("a", "c"), ("b", "c"), ("a", "e"), ("b", "d")]):
...     it = Item.of(CommentEvent(id=f"comment:{i}", event_time=at(9), observed_at=at(9),
...                               comment_id=str(i), post_id="0", author=src, reply_to=dst))
...     cas.update(it); hz.update(it)
>>> hz.fit()
>>> table = hz.table()
>>> sorted(zip(table["duration"], table["exposure"]))
[(1.0, 0), (3.0, 2), (4.0, 1), (9.0, 1)]
>>> snap = hz.snapshot()
>>> snap.value("cascade_hazard_subjects"), snap.value("cascade_hazard_events")
(4.0, 4.0)
"""

from __future__ import annotations

import hashlib
import heapq
import math
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from streams.state.base import Item, Sample, Snapshot
from streams.state.cascades import CascadeEngine

if TYPE_CHECKING:
    import pandas as pd

Model = Literal["published", "time_varying"]


@dataclass(frozen=True, slots=True)
class HazardConfig:
    """model ["published"]: the paper's code's model, or "time_varying" (see the module);
    every [6 h]: event time between two fits in :meth:`HazardEngine.expire` (None: only
    when :meth:`HazardEngine.fit` is called, e.g. a replay's close); min_growth [0.25]: and
    only once the texts seen grew by this share since the last fit (as the roles engine: the
    fits, seconds each, stay a few per tenfold growth of the stream, not one every 6 h of a
    replayed archive); max_cascades [1000]:
    largest cascades fitted; max_rows: table rows (subjects, or episodes) at most (None: the
    model's default, 20,000 published, 5,000 time-varying: the fits grow faster than linearly,
    measured 3-7 s and ~2-3 s on 2 shared cores, bench/bench_published.py);
    time_unit [3600 s]: durations in hours, as the code (the hazard ratio does not depend on
    it)."""

    model: Model = "published"
    every: timedelta | None = timedelta(hours=6)
    min_growth: float = 0.25
    max_cascades: int = 1000
    max_rows: int | None = None

    @property
    def row_cap(self) -> int:
        if self.max_rows is not None:
            return self.max_rows
        return 20_000 if self.model == "published" else 5_000
    time_unit: float = 3600.0


@dataclass(frozen=True, slots=True)
class HazardFit:
    """One fit: the hazard ratio per extra exposure and its 95 % confidence interval."""

    hazard_ratio: float
    lower: float
    upper: float
    coef: float
    se: float
    p: float
    subjects: int
    events: int
    rows: int

    def as_dict(self) -> dict[str, float]:
        return {"hazard_ratio": self.hazard_ratio, "ci_lower": self.lower,
                "ci_upper": self.upper, "coef": self.coef, "se": self.se, "p": self.p,
                "subjects": self.subjects, "events": self.events, "rows": self.rows}


def cox_fit(table: pd.DataFrame, model: Model = "published") -> HazardFit | None:
    """lifelines' Cox fit of a table (published: duration, event, exposure; time_varying:
    id, start, stop, event, exposure), rows sorted first so the fit depends on the rows only.
    None when it cannot be fitted (no event, or no variation of the exposure)."""
    from lifelines import CoxPHFitter  # heavy: imported at first fit
    from lifelines.exceptions import ConvergenceError

    if table.empty or not table["event"].any() or table["exposure"].nunique() < 2:
        return None
    cols = ["duration", "event", "exposure"] if model == "published" else \
        ["id", "start", "stop", "event", "exposure"]
    df = table[cols].sort_values(cols, kind="mergesort").reset_index(drop=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lifelines' convergence advice: judged below
            if model == "published":
                fitter: Any = CoxPHFitter().fit(df, duration_col="duration", event_col="event")
            else:
                fitter = CoxPHFitter().fit(df.drop(columns="id"), duration_col="stop",
                                           event_col="event", entry_col="start")
    except ConvergenceError:
        return None
    coef = float(fitter.params_["exposure"])
    se = float(fitter.standard_errors_["exposure"])
    if not (math.isfinite(coef) and math.isfinite(se)):
        return None
    z = 1.959963984540054  # the normal 97.5 % quantile, lifelines' alpha = 0.05
    subjects = len(df) if model == "published" else int(df["id"].nunique())
    return HazardFit(math.exp(coef), math.exp(coef - z * se), math.exp(coef + z * se), coef,
                     se, float(fitter.summary.loc["exposure", "p"]), subjects,
                     int(df["event"].sum()), len(df))


def sample_subjects(subjects: dict[str, list[tuple]], cap: int) -> list[tuple]:
    """Whole subjects in the order of a fixed hash of their name (blake2b: the same in every
    process and run), while their rows fit in ``cap``: a deterministic random sample.

    >>> len(sample_subjects({"a": [(1,), (2,)], "b": [(3,)], "c": [(4,)]}, 2)) <= 2
    True
    """
    out: list[tuple] = []
    for agent in sorted(subjects, key=lambda a: hashlib.blake2b(a.encode(), digest_size=8)
                        .digest()):
        if len(out) + len(subjects[agent]) > cap:
            break
        out += subjects[agent]
    return out


class HazardEngine:
    """The Cox fit over a cascade engine's state, at a slow cadence.

    ``cascades``: the pipeline's cascade engine (fed by its owner); without one the engine
    keeps and feeds its own.
    """

    def __init__(self, config: HazardConfig | None = None,
                 cascades: CascadeEngine | None = None) -> None:
        self.config = config or HazardConfig()
        self._own_cascades = cascades is None
        self.cascades = CascadeEngine() if cascades is None else cascades
        every = self.config.every
        self._every = None if every is None else every.total_seconds()
        self._due: float | None = None
        self.latest: float | None = None  # latest event time seen: the censoring time
        self.texts = 0  # posts and comments with an author seen (the growth the cadence reads)
        self._texts_fitted = 0  # ... at the last fit
        self.fits_total = 0
        self._fit: HazardFit | None = None
        self._info: dict[str, Any] = {}

    def update(self, item: Item) -> None:
        if self.latest is None or item.t > self.latest:
            self.latest = item.t
        if item.text is not None and item.author is not None:
            self.texts += 1
        if self._own_cascades:
            self.cascades.update(item)

    def expire(self, now: float) -> None:
        """Fit at most once every ``every`` of event time, once the texts grew by
        ``min_growth`` since the last fit."""
        if self._own_cascades:
            self.cascades.expire(now)
        if self._every is None:
            return
        if self._due is None:
            self._due = now + self._every
        elif now >= self._due and self.texts >= (1 + self.config.min_growth) * self._texts_fitted:
            self.fit(now)
            self._due = now + self._every

    # -- the table --------------------------------------------------------------------------
    def _chosen(self) -> list[str]:
        # every cascade named (O(cascades), the engine's one public listing), the largest kept
        top = heapq.nsmallest(self.config.max_cascades,
                              ((-s, g) for g, s in self.cascades.sizes().items()))
        return [g for _, g in top]

    def table(self, now: float | None = None) -> pd.DataFrame:
        """The table the next fit reads (``now``: the censoring time of the time-varying
        model, default the latest event time seen); ``attrs`` say how many cascades it covers
        and whether the row cap cut it."""
        import pandas as pd

        cfg = self.config
        now = self.latest if now is None else now
        rows: list[tuple] = []
        taken = 0
        capped = False
        for gram in self._chosen():
            subjects = (self._published_rows(gram, taken) if cfg.model == "published"
                        else self._varying_rows(gram, taken, now))
            size = sum(map(len, subjects.values()))
            if len(rows) + size > cfg.row_cap:
                capped = True
                if not taken:  # the largest cascade alone is over the cap: its subjects
                    rows += sample_subjects(subjects, cfg.row_cap)  # in a fixed hash order
                    taken = 1
                break
            rows += [r for agent in sorted(subjects) for r in subjects[agent]]
            taken += 1
        cols = ["cascade", "duration", "event", "exposure"] if cfg.model == "published" else \
            ["cascade", "id", "start", "stop", "event", "exposure"]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs.update(cascades=taken, capped=capped)
        return out

    def _published_rows(self, gram: str, no: int) -> dict[str, list[tuple]]:
        """Each subject's row: {adopter: [(cascade, duration, event, exposure)]}."""
        times = self.cascades.adopters(gram)
        exposed = self.cascades.exposures(gram)[0]  # adopters in the graph
        seed = min(times.values())
        unit = self.config.time_unit
        return {a: [(no, (times[a] - seed) / unit, 1, k)] for a, k in exposed.items()
                if times[a] > seed}

    def _varying_rows(self, gram: str, no: int, now: float | None,
                      ) -> dict[str, list[tuple]]:
        """Each subject's episodes: {agent: [(cascade, id, start, stop, event, exposure)]}."""
        times = self.cascades.adopters(gram)
        graph = self.cascades.graph
        hits: dict[str, list[float]] = {}  # exposed agent: its in-neighbours' adoption times
        for src, t in times.items():
            for dst in graph.out_neighbours(src):
                hits.setdefault(dst, []).append(t)
        unit = self.config.time_unit
        end = now if now is not None else max(times.values())
        out: dict[str, list[tuple]] = {}
        for agent, steps in hits.items():
            steps.sort()
            own = times.get(agent)
            first = steps[0]
            stop_at = own if own is not None else end
            if stop_at <= first:
                continue  # adopted at or before its first exposure: never at risk
            sid = f"{no}:{agent}"
            rows = out[agent] = []
            # exposure k on (s_k, s_k+1]: an adoption at s_k+1 itself saw only the k before
            for k, t in enumerate(steps, 1):
                nxt = min(steps[k] if k < len(steps) else stop_at, stop_at)
                if nxt > t:  # several adoptions at one instant: one episode
                    rows.append((no, sid, (t - first) / unit, (nxt - first) / unit,
                                 int(nxt == own), k))
                if nxt >= stop_at:
                    break
        return out

    # -- the fit ----------------------------------------------------------------------------
    def fit(self, now: float | None = None) -> None:
        """Fit now (the pipeline's close; live, :meth:`expire` calls it)."""
        table = self.table(now)
        self.fits_total += 1
        self._texts_fitted = self.texts
        self._fit = cox_fit(table, self.config.model)
        at = now if now is not None else self.latest
        self._info = {"model": self.config.model, "cascades": table.attrs["cascades"],
                      "capped": table.attrs["capped"],
                      "fitted_at": None if at is None else
                      datetime.fromtimestamp(at, UTC).isoformat()}

    def snapshot(self) -> Snapshot:
        samples = [Sample("cascade_hazard_fits_total", float(self.fits_total), kind="counter",
                          help="Cox fits of adoption by exposure run")]
        fit = self._fit
        if fit is not None:
            samples += [
                Sample("cascade_hazard_ratio", fit.hazard_ratio,
                       help="Cox hazard ratio of cascade adoption per extra exposure"),
                Sample("cascade_hazard_ratio_lower", fit.lower, help="Its 95 % CI, lower"),
                Sample("cascade_hazard_ratio_upper", fit.upper, help="Its 95 % CI, upper"),
                Sample("cascade_hazard_subjects", float(fit.subjects),
                       help="Subjects (agent, cascade) in the last fit"),
                Sample("cascade_hazard_events", float(fit.events),
                       help="Adoptions in the last fit"),
            ]
        details = {"cascade_hazard": {**self._info,
                                      **(fit.as_dict() if fit is not None else {})}}
        return Snapshot(samples=samples, details=details)

