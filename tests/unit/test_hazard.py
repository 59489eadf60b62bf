"""Cox hazard ratio per extra exposure: the fit recovers a planted hazard ratio (a table drawn
from the model, and a contagion simulated on a graph and fed through the cascade engine), and
the engine's figure equals a direct lifelines fit of the table that plain code builds from
the same events (real threads, the simulated contagion)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from hashlib import blake2b

import numpy as np
import pandas as pd
import pytest
from lifelines import CoxPHFitter, CoxTimeVaryingFitter
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from streams.events import CommentEvent, PostEvent
from streams.state.base import Item
from streams.state.cascades import CascadeConfig, CascadeEngine
from streams.state.hazard import HazardConfig, HazardEngine, Model, cox_fit, ranked
from streams.text import tokenize
from tests.unit.collective_data import thread_events

T0 = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
Event = PostEvent | CommentEvent


def at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


# -- plain batch code -------------------------------------------------------------------------
def plain_adoptions(events: Sequence[Event], min_adopters: int) -> dict[str, dict[str, float]]:
    """n-gram -> {agent: first use} for the cascades, by the definition with Python sets."""
    first: dict[str, dict[str, float]] = {}
    for e in events:
        if e.author is None:
            continue
        words = [t for t in tokenize(e.text) if t[0].isalnum() or t[0] == "_"]
        t = e.event_time.timestamp()
        for n in (3, 4, 5):
            for i in range(len(words) - n + 1):
                gram = words[i:i + n]
                if sum(w in ENGLISH_STOP_WORDS for w in gram) * 2 > n:
                    continue
                seen = first.setdefault(" ".join(gram), {})
                seen[e.author] = min(seen.get(e.author, t), t)
    return {g: a for g, a in first.items() if len(a) >= min_adopters}


def plain_graph(events: Sequence[Event]) -> dict[str, set[str]]:
    """Cumulative interaction graph: commenter -> the agent replied to, no self-loops."""
    out: dict[str, set[str]] = {}
    for e in events:
        if isinstance(e, CommentEvent) and e.author and e.reply_to and e.author != e.reply_to:
            out.setdefault(e.author, set()).add(e.reply_to)
            out.setdefault(e.reply_to, set())
    return out


def plain_table(events: Sequence[Event], min_adopters: int, model: Model, now: float,
                max_cascades: int = 1000, max_rows: int = 100_000) -> pd.DataFrame:
    cascades = plain_adoptions(events, min_adopters)
    graph = plain_graph(events)
    preds: dict[str, set[str]] = {a: set() for a in graph}
    for u, vs in graph.items():
        for v in vs:
            preds[v].add(u)
    chosen = sorted(cascades, key=lambda g: (-len(cascades[g]), g))[:max_cascades]
    rows: list[tuple] = []
    for no, gram in enumerate(chosen):
        adopted = cascades[gram]
        subjects: dict[str, list[tuple]] = {}
        if model == "published":
            seed = min(adopted.values())
            for a, t in adopted.items():
                if a in graph and t > seed:
                    k = sum(1 for j in preds[a] if j in adopted and adopted[j] < t)
                    subjects[a] = [(no, (t - seed) / 3600, 1, k)]
        else:
            for a in graph:
                times = sorted(adopted[j] for j in preds[a] if j in adopted)
                if not times:
                    continue
                end = adopted.get(a, now)
                # walk the timeline: exposure = in-neighbours adopted strictly before
                cuts = sorted({t for t in times if t < end}) + [end]
                for lo, hi in zip(cuts, cuts[1:], strict=False):
                    k = sum(1 for t in times if t <= lo)
                    subjects.setdefault(a, []).append(
                        (no, f"{no}:{a}", (lo - times[0]) / 3600, (hi - times[0]) / 3600,
                         int(a in adopted and hi == end), k))
        size = sum(len(r) for r in subjects.values())
        if len(rows) + size > max_rows:
            if not rows:  # the largest alone over the cap: whole subjects, by name hash
                for a in sorted(subjects, key=lambda a: blake2b(a.encode(),
                                                                 digest_size=8).digest()):
                    if len(rows) + len(subjects[a]) > max_rows:
                        break
                    rows += subjects[a]
            break
        rows += [r for rs in subjects.values() for r in rs]
    cols = ["cascade", "duration", "event", "exposure"] if model == "published" else \
        ["cascade", "id", "start", "stop", "event", "exposure"]
    return pd.DataFrame(rows, columns=cols)


def lifelines_hr(table: pd.DataFrame, model: Model) -> tuple[float, float, float, int]:
    """A direct lifelines fit: (hazard ratio, 95 % CI lower, upper, events)."""
    if model == "published":
        cols = ["duration", "event", "exposure"]
        df = table[cols].sort_values(cols).reset_index(drop=True)
        f = CoxPHFitter().fit(df, duration_col="duration", event_col="event")
    else:  # the counting-process form (each episode left-truncated)
        cols = ["id", "start", "stop", "event", "exposure"]
        df = table[cols].sort_values(cols).reset_index(drop=True)
        f = CoxPHFitter().fit(df[cols[1:]], duration_col="stop", event_col="event",
                              entry_col="start")
    ci = np.exp(f.confidence_intervals_.loc["exposure"].to_numpy())
    return math.exp(f.params_["exposure"]), float(ci[0]), float(ci[1]), int(df["event"].sum())


# -- a contagion with a planted hazard ratio ----------------------------------------------------
def contagion(hr: float, seed: int, agents: int = 150, cascades: int = 12, degree: int = 4,
              rate: float = 0.08, horizon_h: float = 72.0) -> tuple[list[Event], float]:
    """Agents comment on ``degree`` random others (edges first, an hour before anything);
    per cascade three seeds adopt at once, then each agent with k >= 1 adopted in-neighbours
    adopts at hazard rate x hr^(k-1) per hour (exact: piecewise constant between adoptions,
    drawn event by event), until ``horizon_h``. Returns the events and the end time."""
    rng = random.Random(seed)
    names = [f"ag{i}" for i in range(agents)]
    out_of = [rng.sample([j for j in range(agents) if j != i], degree) for i in range(agents)]
    events: list[Event] = []
    for i, outs in enumerate(out_of):
        for j in outs:
            events.append(CommentEvent(id=f"comment:{i}-{j}", event_time=at(T0 - 3600),
                                       observed_at=at(T0 - 3600), comment_id=f"{i}-{j}",
                                       post_id="edges", author=names[i], reply_to=names[j]))
    end = T0 + horizon_h * 3600
    for c in range(cascades):
        phrase = f"zorb{c} quil{c} vanth{c}"
        k = np.zeros(agents, np.int64)
        adopted = np.zeros(agents, bool)
        t = T0

        def adopt(i: int, when: float, c: int = c, phrase: str = phrase,
                  k: np.ndarray = k, adopted: np.ndarray = adopted) -> None:
            adopted[i] = True
            events.append(PostEvent(id=f"post:{c}-{i}", event_time=at(when),
                                    observed_at=at(when), post_id=f"{c}-{i}", author=names[i],
                                    title=phrase))
            k[out_of[i]] += 1

        for i in rng.sample(range(agents), 3):
            adopt(i, T0)
        while True:
            rates = np.where(adopted | (k == 0), 0.0, rate * hr ** (k - 1.0))
            total = rates.sum()
            if total <= 0:
                break
            t += rng.expovariate(total)
            if t >= end:
                break
            adopt(int(np.searchsorted(np.cumsum(rates), rng.random() * total)), t)
    return sorted(events, key=lambda e: (e.event_time, e.id)), end


def run(events: Sequence[Event], min_adopters: int, config: HazardConfig,
        ) -> tuple[CascadeEngine, HazardEngine]:
    cas = CascadeEngine(CascadeConfig(min_adopters=min_adopters, flush_every=5_000))
    hz = HazardEngine(config, cas)
    for e in events:
        it = Item.of(e)
        cas.update(it)
        hz.update(it)
    return cas, hz


# -- tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2])
def test_planted_ratio_recovered_from_a_drawn_table(seed: int) -> None:
    """Durations drawn from a proportional hazard with HR 0.53 per exposure (the published
    figure): the published model's fit covers it."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 3000)
    table = pd.DataFrame({"duration": rng.exponential(1 / (0.2 * 0.53 ** x)),
                          "event": 1, "exposure": x})
    fit = cox_fit(table, "published")
    assert fit is not None and fit.lower <= 0.53 <= fit.upper
    assert fit.upper / fit.lower < 1.2  # and the interval is informative
    assert (fit.subjects, fit.events) == (3000, 3000)


@pytest.mark.parametrize(("hr", "seed"), [(0.53, 3), (0.53, 4), (1.6, 5)])
def test_planted_ratio_recovered_through_the_engine(hr: float, seed: int) -> None:
    """The time-varying model on a contagion simulated with a planted hazard ratio, fed
    through the cascade engine: the 95 % interval covers the planted ratio."""
    events, end = contagion(hr, seed)
    _, hz = run(events, 5, HazardConfig(model="time_varying"))
    hz.fit(end)
    snap = hz.snapshot()
    lo, hi = snap.value("cascade_hazard_ratio_lower"), snap.value("cascade_hazard_ratio_upper")
    assert lo <= hr <= hi
    assert hi / lo < 1.5
    assert snap.value("cascade_hazard_events") > 1000


@pytest.mark.parametrize("model", ["published", "time_varying"])
def test_engine_equals_a_plain_fit_on_the_simulated_contagion(model: Model) -> None:
    events, end = contagion(0.53, 6, agents=120, cascades=8)
    _, hz = run(events, 5, HazardConfig(model=model))
    hz.fit(end)
    table = plain_table(events, 5, model, end)
    assert_same(hz, table, model)
    if model == "time_varying":  # the counting-process form is lifelines' time-varying fit
        f = CoxTimeVaryingFitter().fit(table.drop(columns="cascade"), id_col="id",
                                       event_col="event", start_col="start", stop_col="stop")
        coef = hz.snapshot().details["cascade_hazard"]["coef"]
        assert abs(f.params_["exposure"] - coef) < 1e-6


@pytest.mark.parametrize("model", ["published", "time_varying"])
def test_engine_table_equals_the_plain_table_on_real_threads(model: Model) -> None:
    """The shared real threads (cascades of >= 3 adopters: 10 leaves too few here): the
    engine builds the plain code's table. The sample's graph is too sparse for a figure: no
    adopter has an adopted in-neighbour before it (every published subject has exposure 0)
    and no exposed agent adopts afterwards, so neither model is identified: no figure."""
    events = thread_events()
    now = max(e.event_time.timestamp() for e in events)
    _, hz = run(events, 3, HazardConfig(model=model))
    hz.fit()
    table = plain_table(events, 3, model, now)
    mine = hz.table()
    cols = list(table.columns)
    assert len(table) > 100
    assert mine.sort_values(cols).reset_index(drop=True).equals(
        table.sort_values(cols).reset_index(drop=True))
    assert table["exposure"].nunique() == 1 or not table["event"].any()
    snap = hz.snapshot()
    assert snap.value("cascade_hazard_ratio") is None
    assert snap.details["cascade_hazard"]["cascades"] == len(plain_adoptions(events, 3))


def assert_same(hz: HazardEngine, table: pd.DataFrame, model: Model) -> None:
    mine = hz.table()
    cols = list(table.columns)
    assert mine.sort_values(cols).reset_index(drop=True).equals(
        table.sort_values(cols).reset_index(drop=True))
    want = lifelines_hr(table, model)
    fit = hz.snapshot().details["cascade_hazard"]
    got = (fit["hazard_ratio"], fit["ci_lower"], fit["ci_upper"], fit["events"])
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_caps_take_whole_cascades_largest_first() -> None:
    events, end = contagion(0.53, 7, agents=120, cascades=8)
    full = plain_table(events, 5, "time_varying", end)
    cap = len(full) // 2
    _, hz = run(events, 5, HazardConfig(model="time_varying", max_rows=cap, max_cascades=6))
    hz.fit(end)
    table = plain_table(events, 5, "time_varying", end, max_cascades=6, max_rows=cap)
    assert 0 < len(table) <= cap
    assert_same(hz, table, "time_varying")
    info = hz.snapshot().details["cascade_hazard"]
    assert info["capped"] and info["cascades"] == table["cascade"].nunique() < 6


@pytest.mark.parametrize("model", ["published", "time_varying"])
def test_engine_equals_a_plain_fit_on_the_simulator(model: Model) -> None:
    """The project's simulated society: its repeated phrases make cascades of >= 10 adopters
    and its replies the graph; capped tables (both caps bite here)."""
    from service.sources.simulate import SimulationConfig, Simulator

    events = sorted((e for e in Simulator(SimulationConfig(seed=1, duration=None,
                                                           max_events=3000))
                     if isinstance(e, PostEvent | CommentEvent)),
                    key=lambda e: (e.event_time, e.id))
    now = events[-1].event_time.timestamp()
    _, hz = run(events, 10, HazardConfig(model=model, max_rows=3000))
    hz.fit()
    table = plain_table(events, 10, model, now, max_rows=3000)
    assert table["event"].sum() >= 50 and table["exposure"].nunique() >= 2
    assert_same(hz, table, model)


def test_a_cascade_over_the_cap_alone_is_sampled_by_subject() -> None:
    events, end = contagion(0.53, 9, agents=120, cascades=3)
    for model in ("published", "time_varying"):
        full = plain_table(events, 5, model, end)  # type: ignore[arg-type]
        first = int((full["cascade"] == 0).sum())
        cap = first // 3
        _, hz = run(events, 5, HazardConfig(model=model, max_rows=cap))  # type: ignore[arg-type]
        hz.fit(end)
        table = plain_table(events, 5, model, end, max_rows=cap)  # type: ignore[arg-type]
        assert cap - 12 <= len(table) <= cap and set(table["cascade"]) == {0}
        assert_same(hz, table, model)  # type: ignore[arg-type]
        info = hz.snapshot().details["cascade_hazard"]
        assert info["capped"] and info["cascades"] == 1


def test_fits_at_a_slow_cadence() -> None:
    events, _ = contagion(0.53, 8, agents=120, cascades=3)
    six = pd.Timedelta(hours=6).to_pytimedelta()
    cas, hz = run(events, 5, HazardConfig(every=six))
    t = events[-1].event_time.timestamp()
    for step in range(0, 13 * 3600, 600):  # 13 h of ticks: due at 6 h and at 12 h
        cas.expire(t + step)  # as the pipeline: the cascades first (analysed at 10 min)
        hz.expire(t + step)
    snap = hz.snapshot()
    # at 12 h no new text came since the 6 h fit (min_growth 25 %): no second fit
    assert snap.value("cascade_hazard_fits_total") == 1
    assert snap.value("cascade_hazard_ratio") is not None
    every = HazardEngine(HazardConfig(every=six, min_growth=0.0), cas)
    for step in range(0, 13 * 3600, 600):
        every.expire(t + step)
    assert every.snapshot().value("cascade_hazard_fits_total") == 2
    never = HazardEngine(HazardConfig(every=None), cas)
    for step in range(0, 13 * 3600, 600):
        never.expire(t + step)
    assert never.snapshot().value("cascade_hazard_fits_total") == 0  # replay: at close only
    empty = HazardEngine()
    empty.fit()
    assert empty.snapshot().value("cascade_hazard_ratio") is None  # nothing to fit: no figure


@pytest.mark.parametrize("seed", range(12))
def test_efron_fit_is_lifelines_fit(seed: int) -> None:
    """The vectorised published fit against lifelines' CoxPHFitter on tables with many tied
    durations, censored rows (the fit takes them, though the published model has none), few
    or many rows: coefficient, standard error, p and the interval to 1e-9."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 2500))
    x = rng.integers(0, int(rng.integers(2, 9)), n)
    t = np.round(rng.exponential(1 / (0.2 * rng.uniform(0.3, 2.0) ** x)), seed % 3)
    e = rng.random(n) < (1.0 if seed % 2 else rng.uniform(0.3, 0.9))
    e[0] = True
    x[:2] = [0, 1]
    table = pd.DataFrame({"duration": t, "event": e.astype(int), "exposure": x})
    fit = cox_fit(table, "published")
    want = CoxPHFitter().fit(table.sort_values(list(table.columns)).reset_index(drop=True),
                             duration_col="duration", event_col="event")
    ci = np.exp(want.confidence_intervals_.loc["exposure"].to_numpy())
    assert fit is not None
    assert (fit.coef, fit.se, fit.p, fit.lower, fit.upper) == pytest.approx(
        (want.params_["exposure"], want.standard_errors_["exposure"],
         want.summary.loc["exposure", "p"], ci[0], ci[1]), rel=1e-9, abs=1e-12)
    assert (fit.subjects, fit.events, fit.rows) == (n, int(e.sum()), n)


def test_ranked_is_size_then_name_order() -> None:
    """The cascades largest first, ties by n-gram, cut at the limit: the order of
    :meth:`CascadeEngine.sizes` sorted by (-size, n-gram)."""
    events, _ = contagion(0.53, 10, agents=120, cascades=12)
    cas, _ = run(events, 3, HazardConfig())
    sizes = cas.sizes()
    want = sorted(sizes, key=lambda g: (-sizes[g], g))
    assert len(set(sizes.values())) < len(sizes)  # ties to order
    for limit in (1, 3, 5, len(want), len(want) + 4):
        assert list(ranked(cas, limit)) == want[:limit]


def test_a_due_fit_waits_for_the_cascade_analysis() -> None:
    """Due, a live fit waits for a tick at which the cascade engine is settled (analysed, no
    text since: the fit's read forces no early merge of its buffer) and comes at that tick."""
    events, _ = contagion(0.53, 8, agents=120, cascades=3)
    cas, hz = run(events[:-50], 5, HazardConfig(every=pd.Timedelta(hours=6).to_pytimedelta()))
    t = events[-1].event_time.timestamp()
    hz.expire(t)  # due at t + 6 h
    for e in events[-50:]:
        it = Item.of(e)
        cas.update(it)
        hz.update(it)
    hz.expire(t + 7 * 3600)
    assert hz.snapshot().value("cascade_hazard_fits_total") == 0  # due, but texts unanalysed
    for at_s in (t + 7 * 3600, t + 7 * 3600 + 600):  # the cascades analyse at the second
        cas.expire(at_s)
        hz.expire(at_s)
    info = hz.snapshot().details["cascade_hazard"]
    assert hz.snapshot().value("cascade_hazard_fits_total") == 1
    assert info["fitted_at"] == at(t + 7 * 3600 + 600).isoformat()


@pytest.mark.parametrize("seed", range(8))
def test_efron_fit_with_entries_is_lifelines_fit(seed: int) -> None:
    """Left-truncated rows (each at risk on (start, stop]; tied stops and starts, entries at
    other rows' death times, censoring): the vectorised fit against lifelines' CoxPHFitter
    with ``entry_col``, 1e-9."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(8, 2000))
    start = np.round(rng.exponential(3.0, n), seed % 3)
    stop = start + np.round(rng.exponential(2.0, n), seed % 3) + 0.5
    x = rng.integers(0, int(rng.integers(2, 7)), n)
    x[:2] = [0, 1]
    e = rng.random(n) < rng.uniform(0.3, 1.0)
    e[0] = True
    table = pd.DataFrame({"id": [f"s{i}" for i in range(n)], "start": start, "stop": stop,
                          "event": e.astype(int), "exposure": x})
    fit = cox_fit(table, "time_varying")
    df = table.sort_values(list(table.columns)).reset_index(drop=True)
    want = CoxPHFitter().fit(df.drop(columns="id"), duration_col="stop", event_col="event",
                             entry_col="start")
    ci = np.exp(want.confidence_intervals_.loc["exposure"].to_numpy())
    assert fit is not None
    assert (fit.coef, fit.se, fit.p, fit.lower, fit.upper) == pytest.approx(
        (want.params_["exposure"], want.standard_errors_["exposure"],
         want.summary.loc["exposure", "p"], ci[0], ci[1]), rel=1e-9, abs=1e-12)
