"""Cox proportional hazard of cascade adoption per extra exposure (Molt Dynamics: HR 0.53).

Exposure of an agent to a cascade = its in-neighbours in the cumulative interaction graph
(agents who commented on it) that adopted the cascade's n-gram before it (metrics.md B, as
:mod:`streams.state.cascades` computes it). The paper gives one number; its public code
(YCRG-Labs/molt-dynamics, ``rq2_diffusion.py`` ``fit_cox_hazards``) fixes the model, which is
the default here; the other model is the textbook at-risk set, for a figure that reads as a
hazard. Both are lifelines' Cox fit (Efron ties).

- ``model="published"`` (the code's): one subject per adopter of a cascade that is in the
  graph and adopted strictly after the cascade's seed (its first adoption by anyone); duration
  = hours from the seed to its adoption; every subject an event (no censoring, no
  non-adopters); covariate = its exposure at adoption. Fitted by :func:`efron_fit`:
  :class:`lifelines.CoxPHFitter`'s computation step for step (standardised covariate,
  Newton-Raphson from 0 with its step sizes and stopping rules), each step vectorised instead
  of its Python loop over rows: equal to lifelines to rounding (1e-9 tested, 1e-11 seen), 14 ms
  instead of 0.7 s at 19k rows.
- ``model="time_varying"``: per cascade, the agents of the graph with at least one adopted
  in-neighbour; each is at risk from its first exposure (the first adoption among its
  in-neighbours) to its own adoption (event) or to the analysis time (censored); its exposure
  is a step covariate, one episode per further in-neighbour adoption. An agent that adopted at
  or before its first exposure is not at risk. Fitted in the counting-process form, each
  episode a left-truncated row (:class:`lifelines.CoxPHFitter` with ``entry_col``, computed
  by :func:`efron_fit` too, equal to it to 1e-9, tested): the same partial likelihood as
  :class:`lifelines.CoxTimeVaryingFitter` (coefficients within 1e-6 on the tested contagion;
  the two lifelines fitters stop at different points near the same optimum, up to ~1e-5
  apart on random tables).

Both read the graph as it stands at the fit (the paper's static graph: an edge formed after an
adoption still counts). The table, bounded: cascades largest first (ties by n-gram), at most
``max_cascades``; cascades are added whole while the table stays within the row cap; when the
largest alone is over it, its subjects are sampled (whole, in a fixed hash order of their
names, :func:`sample_subjects`) up to the cap. The sample is deterministic and the details'
``capped`` says when the cap bit. Every fit is the exact computation on the cascades and the
graph of its time: nothing is approximated, so the replay's fit at close is the published
figure on the whole archive (under the caps above, as before).

Cost of a fit, flat in the history (measured on the real-text stream, 2k to 364k cascades:
0.06-0.09 s a fit, table included): :func:`ranked` picks the largest cascades by a partition
of the size array (O(n-grams tracked) in NumPy) and names only those it reaches (naming
every cascade, as :meth:`CascadeEngine.sizes` does, took 1.2 s a fit at 364k); then the chosen
cascades' adopters and exposures (:meth:`CascadeEngine.adopters`,
:meth:`~CascadeEngine.exposures`: O(their adopters and out-edges), bounded by the row cap
except when the largest cascade alone is over it, then O(its adopters)); the published fit
O(rows log rows). Live, :meth:`HazardEngine.expire` fits at most every ``every`` of event time
(6 h) and once the texts grew by ``min_growth`` (25 %), at the first tick at which the cascade
engine is settled (:meth:`CascadeEngine.settled`: it analysed at that tick, or no text came
since its last analysis; its analysis runs every ``analysis_every`` once ``analysis_min_texts``
(10k) more texts came, so a due fit waits at most that): the fit then reads the cascades' state
without forcing an early merge of their buffer (which cost more than the fit itself). A replay
fits at :meth:`HazardEngine.fit` (the pipeline's close). State: the last fit's figures (a few
numbers); the table is dropped after each fit, so a pickle round-trip changes nothing.

What this engine reads of the cascade engine: the public :meth:`~CascadeEngine.adopters`,
:meth:`~CascadeEngine.exposures` (each adopter's exposure against the graph),
``texts_total``, its interaction graph (``graph.out_neighbours``, time-varying model),
:meth:`~CascadeEngine.cascade_ids` and :meth:`~CascadeEngine.ngram` (see :func:`ranked`) and
:meth:`~CascadeEngine.settled`.

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
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from scipy import special

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
    model's default, 20,000 published, 5,000 time-varying, as when lifelines fitted them in
    seconds; the fit is now O(rows log rows), ~15 ms at 19k rows: the caps bound the table's
    build and keep the figures as they were);
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
    """The Cox fit of a table (published: duration, event, exposure; time_varying: id, start,
    stop, event, exposure; each episode a row at risk on (start, stop]) by :func:`efron_fit`
    (lifelines' CoxPHFitter computation, vectorised), on the rows sorted first so the fit
    depends on the rows only. None when it cannot be fitted (no event, or no variation of the
    exposure)."""
    if table.empty:
        return None
    varying = model != "published"
    return _fit_columns(table["event"].to_numpy(bool), table["exposure"].to_numpy(np.float64),
                        table["stop" if varying else "duration"].to_numpy(np.float64),
                        table["start"].to_numpy(np.float64) if varying else None,
                        (lambda: int(table["id"].nunique())) if varying else None)


def _fit_columns(event: np.ndarray, exposure: np.ndarray, stop: np.ndarray,
                 start: np.ndarray | None, subjects: Callable[[], int] | None,
                 ) -> HazardFit | None:
    """:func:`cox_fit` on the table's columns (``start``: left truncation; ``subjects``: how
    many subjects the rows are, when several rows may be one)."""
    if not len(event) or not event.any() or len(np.unique(exposure)) < 2:
        return None
    fit = efron_fit(stop, event, exposure, start)
    if fit is None or subjects is None:
        return fit
    return replace(fit, subjects=subjects())


def _hazard_fit(coef: float, se: float, p: float, subjects: int, events: int,
                rows: int) -> HazardFit:
    z = 1.959963984540054  # the normal 97.5 % quantile, lifelines' alpha = 0.05
    return HazardFit(math.exp(coef), math.exp(coef - z * se), math.exp(coef + z * se), coef,
                     se, p, subjects, events, rows)


def efron_fit(duration: np.ndarray, event: np.ndarray, exposure: np.ndarray,
              entry: np.ndarray | None = None) -> HazardFit | None:
    """The Cox fit of one covariate, Efron ties, optionally left-truncated rows (``entry``:
    each row at risk on (entry, duration]): lifelines' CoxPHFitter computation step for step
    (the covariate standardised by its mean and sample standard deviation, Newton-Raphson from
    0 with lifelines' step sizes and stopping rules, the variance from the last Hessian, p from
    the Wald chi-square), each step's partial likelihood, gradient and Hessian vectorised
    (reversed cumulative sums over the rows sorted by duration, less those over the rows
    sorted by entry) instead of lifelines' Python loop over rows or death times: O(n log n)
    once, O(n) a step. Equal to lifelines' fit to rounding (tests: 1e-9). None where lifelines
    raises a ConvergenceError (a Hessian that is not negative, or NaN) or the figures are not
    finite. ``subjects`` is the rows (the caller counts subjects of several rows).

    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 4, 400).astype(float)
    >>> fit = efron_fit(np.round(rng.exponential(1 / 0.5 ** x), 1), np.ones(400, bool), x)
    >>> 0.4 < fit.hazard_ratio < 0.6, fit.events
    (True, 400)
    """
    keys = (exposure, event, duration) if entry is None else (exposure, entry, event, duration)
    order = np.lexsort(keys)
    t, e, x = duration[order], event[order], exposure[order]
    std = float(np.std(x, ddof=1))
    if not std > 0:
        return None
    terms = _efron_terms(t, e, (x - x.mean()) / std, None if entry is None else entry[order])
    beta, delta, step = 0.0, 0.0, 0.95
    sizer = _StepSizer(step)
    previous = 0.0
    for i in range(1, 501):
        beta += step * delta
        hessian, gradient, ll = terms(beta)
        if not (-hessian > 0 and math.isfinite(gradient)):  # lifelines' solve fails
            return None
        delta = gradient / -hessian
        if math.isnan(delta):
            return None
        norm = abs(delta)
        if (norm < 1e-7 or (previous != 0 and abs(ll - previous) / -previous < 1e-9)
                or gradient * delta / 2 < 1e-7 or i >= 500 or step <= 1e-5
                or (abs(ll) < 1e-4 and norm > 1.0)):
            break
        previous = ll
        step = sizer.update(norm)
    coef = beta / std
    se = math.sqrt(-1.0 / hessian / (std * std))
    if not (math.isfinite(coef) and math.isfinite(se)):
        return None
    return _hazard_fit(coef, se, float(special.chdtrc(1, (coef / se) ** 2)), len(t),
                       int(e.sum()), len(t))


def _efron_terms(t: np.ndarray, e: np.ndarray, x: np.ndarray, entry: np.ndarray | None,
                 ) -> Callable[[float], tuple[float, float, float]]:
    """For rows sorted by duration: beta -> (Hessian, gradient, log partial likelihood) with
    Efron's ties. A death time's risk set: the rows from the first one ending at or after it
    on (reversed cumulative sums), less those entering at or after it (the same over the rows
    sorted by entry); its l-th of m tied deaths takes l/m of the tied deaths' sums off."""
    ev = np.flatnonzero(e)
    te = t[ev]
    new = np.empty(len(ev), bool)
    new[:1] = True
    np.not_equal(te[1:], te[:-1], out=new[1:])
    ge = np.cumsum(new) - 1  # each death's tie group
    m = np.bincount(ge)
    f = (np.arange(len(ev)) - (np.cumsum(m) - m)[ge]) / m[ge]  # l / m of each death
    at = np.searchsorted(t, te)  # its risk set's first row
    if entry is not None:
        by_entry = np.argsort(entry, kind="stable")
        late = np.searchsorted(entry[by_entry], te)  # rows entering at or after it: from here
    xe = x[ev]
    xs = float(xe.sum())
    x2 = x * x

    def tail(v: np.ndarray) -> np.ndarray:
        """The sums of v over the risk sets."""
        out = np.append(np.cumsum(v[::-1])[::-1], 0.0)
        if entry is None:
            return out[at]
        return out[at] - np.append(np.cumsum(v[by_entry][::-1])[::-1], 0.0)[late]

    def terms(beta: float) -> tuple[float, float, float]:
        phi = np.exp(beta * x)
        pe = phi[ev]
        den = tail(phi) - f * np.bincount(ge, pe)[ge]
        s = (tail(phi * x) - f * np.bincount(ge, pe * xe)[ge]) / den
        a1 = (tail(phi * x2) - f * np.bincount(ge, pe * xe * xe)[ge]) / den
        return float((s * s - a1).sum()), xs - float(s.sum()), beta * xs - float(
            np.log(den).sum())

    return terms


class _StepSizer:
    """lifelines.utils.StepSizer: the Newton step's length from the recent step norms."""

    def __init__(self, initial: float) -> None:
        self.initial = self.step = initial
        self.temper = False
        self.norms: list[float] = []

    def update(self, norm: float) -> float:
        self.norms.append(norm)
        if self.temper:
            self.step = min(self.step * 1.3, self.initial)
        if norm >= 15.0:
            self.step *= 0.1
            self.temper = True
        elif 15.0 > norm > 5.0:
            self.step *= 0.25
            self.temper = True
        if len(self.norms) >= 3:
            a, b, c = self.norms[-3:]
            if b < a and c < b:
                self.step = min(self.step * 1.3, 1.0)
            else:
                self.step *= 0.98
        return self.step


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


def ranked(cascades: CascadeEngine, limit: int) -> Iterator[str]:
    """The ``limit`` largest cascades' n-grams, largest first, ties by n-gram, named as they
    are reached: a fit reads a handful (its row cap), so naming all of them
    (:meth:`CascadeEngine.sizes`, O(cascades) in Python: 1.2 s of a fit at 364k cascades) is
    not done. Cost: O(n-grams tracked) in NumPy (a partition, no sort of them all), plus the
    names of the cascades reached and of those tied with the last.
    """
    ids, sizes = cascades.cascade_ids()
    if len(sizes) > limit:  # the limit largest, with every one tied with the last of them
        keep = sizes >= np.partition(sizes, len(sizes) - limit)[len(sizes) - limit]
        ids, sizes = ids[keep], sizes[keep]
    order = np.argsort(-sizes, kind="stable")
    ids, sizes = ids[order], sizes[order]
    cuts = [0, *(np.flatnonzero(np.diff(sizes)) + 1).tolist(), len(sizes)]
    taken = 0
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        level = sorted(cascades.ngram(g) for g in ids[lo:hi].tolist())
        yield from level[:limit - taken]
        taken += hi - lo
        if taken >= limit:
            return


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
        t, latest = item.t, self.latest
        if latest is None or t > latest:
            self.latest = t
        if item.author is not None and item.text is not None:
            self.texts += 1
        if self._own_cascades:
            self.cascades.update(item)

    def expire(self, now: float) -> None:
        """Fit at most once every ``every`` of event time, once the texts grew by
        ``min_growth`` since the last fit, at a tick where the cascade engine is settled
        (:meth:`CascadeEngine.settled`: analysed with no text since, so the fit's read does not
        force it to merge its buffer early)."""
        if self._own_cascades:
            self.cascades.expire(now)
        if self._every is None:
            return
        if self._due is None:
            self._due = now + self._every
        elif (now >= self._due and self.texts >= (1 + self.config.min_growth)
              * self._texts_fitted and self.cascades.settled()):
            self.fit(now)
            self._due = now + self._every

    # -- the table --------------------------------------------------------------------------
    def table(self, now: float | None = None) -> pd.DataFrame:
        """The table the next fit reads (``now``: the censoring time of the time-varying
        model, default the latest event time seen); ``attrs`` say how many cascades it covers
        and whether the row cap cut it."""
        import pandas as pd

        rows, taken, capped = self._rows(now)
        cols = ["cascade", "duration", "event", "exposure"] if self.config.model == \
            "published" else ["cascade", "id", "start", "stop", "event", "exposure"]
        out = pd.DataFrame(rows, columns=cols)
        out.attrs.update(cascades=taken, capped=capped)
        return out

    def _rows(self, now: float | None) -> tuple[list[tuple], int, bool]:
        """The table's rows (see :meth:`table`), how many cascades they cover, whether the
        row cap cut them."""
        cfg = self.config
        now = self.latest if now is None else now
        rows: list[tuple] = []
        taken = 0
        capped = False
        for gram in ranked(self.cascades, cfg.max_cascades):
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
        return rows, taken, capped

    def _published_rows(self, gram: str, no: int) -> dict[str, list[tuple]]:
        """Each subject's row: {adopter: [(cascade, duration, event, exposure)]}."""
        names, at, exposure = self.cascades.adoptions(gram)
        times = at.tolist()
        seed = min(times)
        unit = self.config.time_unit
        return {a: [(no, (t - seed) / unit, 1, k)]  # adopters in the graph (k >= 0)
                for a, t, k in zip(names, times, exposure.tolist(), strict=True)
                if k >= 0 and t > seed}

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
        rows, taken, capped = self._rows(now)
        self.fits_total += 1
        self._texts_fitted = self.texts
        # the table's columns straight from its rows (what :func:`cox_fit` reads of the
        # DataFrame: the same arrays, without building it)
        if not rows:
            self._fit = None
        elif self.config.model == "published":
            _, duration, event, exposure = zip(*rows, strict=True)
            self._fit = _fit_columns(np.array(event, bool), np.array(exposure, np.float64),
                                     np.array(duration, np.float64), None, None)
        else:
            _, ids, start, stop, event, exposure = zip(*rows, strict=True)
            self._fit = _fit_columns(np.array(event, bool), np.array(exposure, np.float64),
                                     np.array(stop, np.float64), np.array(start, np.float64),
                                     lambda: len(set(ids)))
        at = now if now is not None else self.latest
        self._info = {"model": self.config.model, "cascades": taken, "capped": capped,
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

