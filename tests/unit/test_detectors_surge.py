"""Coordinated surge detector: real token-mint flood, batch check of its evidence, no false
alerts on organic trends, single spammers or steady entities."""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path

from detectors.runner import DetectorConfig, DetectorSuite
from detectors.surge import SurgeConfig, SurgeDetector, _contract, _Post, extract_entities
from service.sources.archive import open_archive
from streams.events import AgentEvent, DeadLetter, PostEvent
from streams.state.base import Item
from streams.text import Text
from tests.unit.hashseeds import under_hash_seeds

T0 = datetime(2026, 2, 1, tzinfo=UTC)


def post(i: int, t: float, author: str, text: str) -> PostEvent:
    when = T0 + timedelta(seconds=t)
    return PostEvent(id=f"post:{i}", event_time=when, observed_at=when, post_id=str(i),
                     author=author, content=text)


def run(events: list, cfg: SurgeConfig | None = None, every: float = 5.0) -> list:
    d = SurgeDetector(cfg or SurgeConfig())
    found, last = [], None
    for e in events:
        d.update(Item.of(e))
        t = e.event_time.timestamp()
        if last is None or t - last >= every:
            found += d.findings(t)
            last = t
    return found + d.findings(events[-1].event_time.timestamp())


def background(n: int = 600, span: float = 4 * 3600, seed: int = 1) -> list[PostEvent]:
    """Organic chatter: varied texts, popular hashtags and links, no coordination."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(400)]
    out = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(6, 20)))
        text += rng.choice(["", " #agents", " https://github.com/openclaw", " #molt"])
        out.append(post(i, i * span / n, f"agent{rng.randrange(150)}", text))
    return out


def entities(raw: str) -> set[str]:
    return extract_entities(Text.of(raw), raw)


def test_entities() -> None:
    text = ('$PEPE mint {"p":"mbc-20","op":"mint","tick":"claw","amt":"100"} CA: '
            "7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU "
            "0x52908400098527886E0F7030069857D2E4169EE7 see https://www.Pump.fun/coin/abc?ref=1"
            " and https://moltbook.com/post/1 #ToTheMoon")
    # from the one tokeniser's tokens: lower case, and full URLs are removed before tokenising
    assert {e for e in entities(text) if not e.startswith("text:")} == {
        "token:PEPE", "token:CLAW", "mint:CLAW",
        "contract:7xkxtg2cw87d97txjsdpbd5jbkhetqa83tzrujosgasu",
        "contract:0x52908400098527886e0f7030069857d2e4169ee7", "hashtag:tothemoon"}
    assert entities("costs $100 and #1") == set()
    assert entities("mint at mbc20.xyz now, not moltbook.com") == {"url:mbc20.xyz"}
    assert entities("Mint CLAW now and get rich quick friends [4CACeeJC]") == entities(
        "Mint CLAW now and get rich quick friends [62qoqi]") != set()


def test_real_mint_flood_surfaces_with_token_and_agents(moltbook_data: Path) -> None:
    """The archived profiles hold the CLAW mint flood of 2026-02-08 07:48-08:17 UTC."""
    events = sorted((e for e in open_archive([moltbook_data / "api" / "agent-profiles.jsonl"])
                     if not isinstance(e, DeadLetter)), key=lambda e: e.event_time)
    suite = DetectorSuite(DetectorConfig(enabled=("surge",)))
    last = None
    for e in events:
        suite.update(Item.of(e))
        t = e.event_time.timestamp()
        if last is None or t - last >= 10:  # the pipeline's tick
            suite.expire(t)
            suite.evaluate(t)
            last = t
    suite.close(events[-1].event_time.timestamp())
    [row] = suite.report()
    ev = row["evidence"]
    assert (row["type"], row["key"], row["severity"]) == ("surge", "mint:CLAW", "critical")
    assert row["start"].startswith("2026-02-08T08:0") and row["end"].startswith("2026-02-08T08:1")
    assert {"BurnMolt6", "BurnMolt7", "BurnMolt8", "BurnMolt9", "BurnMolt10", "SweeMolt6",
            "SweeMolt9", "SweeMolt10", "KeleBot", "a8yq6d"} <= set(ev["agents"])
    assert ev["automated_posts"] >= 3 and ev["min_copost_gap_s"] < 5  # the last window's
    assert ev["new_account_share"] == 1.0  # every minter's profile was created that day
    # evidence a person can act on: the mint texts, their near-duplicate clusters, who led
    assert ev["exemplars"] and all('"tick":"CLAW"' in x["text"] or "CLAW" in x["text"]
                                   for x in ev["exemplars"])
    assert all(x["agent"] in ev["agents"] for x in ev["exemplars"])
    assert ev["clusters"][0]["size"] >= 2 and ev["cluster_jaccard"] == 0.7
    tl = ev["timeline"]
    assert tl["agents"] == ev["incident_agent_count"] >= 10 and tl["leaders"] >= 1
    times = [x["t"] for x in tl["entries"]]
    assert times == sorted(times) and tl["entries"][0]["role"] == "leader"
    assert tl["start"] <= datetime.fromisoformat(row["start"]).timestamp()
    start = int(datetime.fromisoformat(row["start"]).timestamp())
    assert ev["link"] == f"/#alert-{row['fingerprint']}:{start}"


def test_evidence_matches_a_batch_computation() -> None:
    rng = random.Random(3)
    cfg = SurgeConfig(warmup_s=0)
    events = background(200, 3600)
    mint = ('Minting $ZORK now {"p":"mbc-20","op":"mint","tick":"ZORK","amt":"1000"} '
            "mbc20.xyz")
    flood = []
    for k in range(40):
        t = 3600 + 20 * k + rng.uniform(0, 3)
        flood.append(post(1000 + k, t, f"zork_bot_{rng.randrange(25)}",
                          mint + (f" #{k}" if k % 3 else "")))
    events = sorted(events + flood, key=lambda e: e.event_time)
    d = SurgeDetector(cfg)
    for e in events:
        d.update(Item.of(e))
    now = events[-1].event_time.timestamp()
    [f] = d.findings(now)
    assert f.key == "mint:ZORK"
    assert {"token:ZORK", "url:mbc20.xyz"} <= set(f.evidence["related_entities"])
    in_window = [p for p in flood if p.event_time.timestamp() > now - cfg.window_s]
    # window counts are whole buckets: off by at most the posts of the boundary bucket
    boundary = [p for p in flood if now - cfg.window_s - cfg.bucket_s
                < p.event_time.timestamp() <= now - cfg.window_s]
    assert abs(f.evidence["posts_in_window"] - len(in_window)) <= len(boundary)
    assert f.evidence["distinct_accounts"] == len({p.author for p in in_window})
    # the timeline: every minter's first post, in order; the clusters: the mint texts
    first: dict[str, float] = {}
    for p in flood:
        first.setdefault(p.author, p.event_time.timestamp())
    tl = f.evidence["timeline"]
    assert tl["agents"] == len(first)
    assert [(x["agent"], x["t"]) for x in tl["entries"]] == sorted(
        first.items(), key=lambda kv: (kv[1], kv[0]))[:30]
    assert sum(c["size"] for c in f.evidence["clusters"]) == len(flood)
    coordinated = 0

    def inscription(text: str) -> dict | None:
        m = re.search(r"\{[^{}]*\}", text)
        return json.loads(m.group(0)) if m else None

    for i, p in enumerate(in_window):  # brute force: any twin from another agent in 60 s
        for j, q in enumerate(in_window):
            gap = abs((p.event_time - q.event_time).total_seconds())
            if i != j and p.author != q.author and gap <= cfg.copost_s:
                a = set(re.findall(r"\w+", p.text.lower()))
                b = set(re.findall(r"\w+", q.text.lower()))
                same = inscription(p.text) is not None and inscription(p.text) == inscription(
                    q.text)  # the same inscription, whatever its prose
                if same or len(a & b) / len(a | b) >= cfg.near_dup_jaccard:
                    coordinated += 1
                    break
    assert f.evidence["coordination_share"] == round(coordinated / len(in_window), 3)


def test_no_alert_on_organic_trends_single_spammers_or_steady_entities() -> None:
    events = background()
    assert run(events) == []
    # one agent posting the same mint 50 times: volume without accounts
    spam = [post(5000 + k, 3 * 3600 + 10 * k, "lonely_minter",
                 'mint {"p":"mbc-20","op":"mint","tick":"SOLO","amt":"1"}') for k in range(50)]
    assert run(sorted(events + spam, key=lambda e: e.event_time)) == []
    # an established coordinated token at a steady rate is its own baseline
    steady = [post(7000 + k, 60 * k + 1, f"fan{k % 12}", "$GM gm gm daily $GM check in")
              for k in range(6 * 60)]
    assert run(steady, every=30) == []


def test_established_entity_fires_on_a_jump_against_its_baseline() -> None:
    steady = [post(7000 + k, 600 * k + 1, f"fan{k % 12}", "$GM gm daily $GM check in")
              for k in range(24)]
    jump = [post(8000 + k, 4 * 3600 + 5 * k, f"gm_bot_{k}", "$GM gm daily $GM check in")
            for k in range(40)]
    found = run(steady + jump)
    assert found and found[0].key == "token:GM" and found[0].evidence["novel"] is False
    assert found[0].evidence["baseline_expected"] > 0


def test_new_accounts_share_uses_known_creation_times() -> None:
    events: list = []
    for k in range(10):
        when = T0 + timedelta(hours=2)
        events.append(AgentEvent(id=f"agent:m{k}", event_time=when, observed_at=when,
                                 name=f"m{k}", created_at=when - timedelta(
                                     minutes=5 if k < 6 else 60 * 72)))
    events += [post(k, 2 * 3600 + 60 + 3 * k, f"m{k}", "$NEWT mint now $NEWT live")
               for k in range(10)]
    found = run(background(100, 3600) + events, SurgeConfig(warmup_s=0))
    assert {f.key for f in found} == {"token:NEWT"}
    assert found[-1].evidence["new_account_share"] == 0.6


# --- the real mint flood over the real-text background (issue 10 item 7) --------------------

FLOOD_AT = 4 * 3600.0  # after the hour of warm-up and the baselines' first hours


def real_background(seed: int, until: float) -> list:
    """The real-text stream of bench/realtext.py (real texts, shapes, authors) without its flood,
    to ``until`` seconds after its start."""

    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    import realtext

    cfg = realtext.RealTextConfig(seed=seed, scale=0.075, flood_accounts=0)
    out = []
    for e in realtext.RealTextStream(cfg).events():
        if (e.event_time - cfg.start).total_seconds() > until:
            break
        out.append(e)
    return out


def claw_texts(moltbook_data: Path) -> list[tuple[str, str]]:
    """The real CLAW mint posts (title, content) of the shared data: mbc-20 JSON inscriptions,
    compact or spaced, wrapped in varied prose and salts."""
    out = {(p.title, p.content) for p in open_archive([moltbook_data / "api" / "posts"])
           if isinstance(p, PostEvent) and re.search(r'"tick"\s*:\s*"CLAW"', p.content or "")
           and re.search(r'"op"\s*:\s*"mint"', p.content)}
    return sorted(out)


def plant_flood(bg: list, texts: list[tuple[str, str]], seed: int, accounts: int = 15,
                posts: int = 30) -> tuple[list, float]:
    """Real CLAW texts resampled into a 30-minute flood by new accounts over ``bg``."""
    rng = random.Random(seed)
    start = bg[0].event_time + timedelta(seconds=FLOOD_AT)
    planted = []
    names = [f"claw_minter{seed}_{a}" for a in range(accounts)]
    for name in names:
        when = start + timedelta(seconds=rng.uniform(-600, -60))
        planted.append(AgentEvent(id=f"agent:{name}", event_time=when, observed_at=when, name=name,
                                  created_at=when))
    for i in range(posts):
        when = start + timedelta(seconds=rng.uniform(0, 1800))
        title, content = rng.choice(texts)
        planted.append(PostEvent(id=f"post:flood{i}", event_time=when, observed_at=when,
                                 post_id=f"flood{i}", author=names[i % accounts], title=title,
                                 content=content))
    return sorted(bg + planted, key=lambda e: e.event_time), start.timestamp()


def run_ticks(events: list, every: float = 10.0) -> list:
    """The pipeline's way: expire and evaluate once per tick of event time."""
    d = SurgeDetector()
    found, last = [], None
    for e in events:
        d.update(Item.of(e))
        t = e.event_time.timestamp()
        if last is None or t - last >= every:
            d.expire(t)
            found += [(t, f) for f in d.findings(t)]
            last = t
    return found


def test_real_claw_flood_over_real_background_is_caught_and_clean_is_silent(
        moltbook_data: Path) -> None:
    texts = claw_texts(moltbook_data)
    assert len(texts) >= 10 and any('"tick": "CLAW"' in c for _, c in texts)  # spaced JSON too
    for seed in (0, 1):
        bg = real_background(seed, FLOOD_AT + 3600)
        assert run_ticks(bg) == []  # the clean real background raises nothing
        events, start = plant_flood(bg, texts, seed)
        found = run_ticks(events)
        assert found, seed
        assert {f.key for _, f in found} == {"mint:CLAW"}
        t, first = found[0]
        assert start < t <= start + 1800  # within the flood
        assert "token:CLAW" in first.evidence["related_entities"]
        assert first.evidence["coordination_share"] >= 0.3
        assert set(first.evidence["agents"]) <= {f"claw_minter{seed}_{a}" for a in range(15)}


def scanned_entities(tokens: list[str], raw: str) -> set[str]:
    """The published token scans, one token at a time: tickers after a token ending in "$",
    hashtags after one ending in "#", hosts before a known top-level domain (when the raw text
    has a dot then a known top-level domain)."""
    from detectors.surge import _OWN_HOSTS, _TLD_RE, _TLD_SET, _ticker

    out: set[str] = set()
    for i in range(len(tokens) - 1):
        t, nxt = tokens[i], tokens[i + 1]
        if t[-1] == "$" and _ticker(nxt, 12):
            out.add(f"token:{nxt.upper()}")
        elif t[-1] == "#" and _ticker(nxt, 40) and len(nxt) >= 3:
            out.add(f"hashtag:{nxt}")
    for i in range(1, len(tokens) - 1 if _TLD_RE.search(raw) else 0):
        if tokens[i] == "." and tokens[i + 1] in _TLD_SET and tokens[i - 1][0].isalnum():
            j = i - 1
            while j >= 2 and tokens[j - 1] in (".", "-") and tokens[j - 2][0].isalnum():
                j -= 2
            host = "".join(tokens[j:i + 2])
            if host not in _OWN_HOSTS:
                out.add(f"url:{host}")
    return out


def test_token_scans_equal_the_token_by_token_rule() -> None:
    """The C-level scans (joined tokens, list.index) find exactly what the token-by-token scan
    finds, on random texts dense in marks, dots, dashes and domains."""
    rng = random.Random(3)
    parts = ["$", "#", "##", "($", "#$", ".", "-", " ", "  ", "xyz", "com", "io", "ai", "claw",
             "_x", "9lives", "mbc20", "moltbook", "www", "a", "ÉTÉ", "ok", "$$", ".", "-", ".io",
             ".com", ".xyz"]
    for _ in range(3000):
        raw = "".join(rng.choice(parts) + rng.choice(["", " "]) for _ in range(rng.randint(1, 30)))
        text = Text.of(raw)
        kinds = ("token:", "hashtag:", "url:")
        got = {e for e in extract_entities(text, raw, 10**6) if e.startswith(kinds)}
        want = {e for e in scanned_entities(text.tokens, raw) if e.startswith(kinds)}
        if "tick" not in raw:  # (inscriptions add their own tickers)
            assert got == want, raw


def test_long_texts_and_gathered_tokens_give_the_same_entities() -> None:
    """A text longer than the kernels' output array holds (grown for it), and a text whose
    tokens were gathered already (read from the list, not the cache rows): the same entities
    as the token-by-token and word-by-word rules."""
    for words in (10, 5000):
        raw = " ".join(["gm"] * words) + " $claw #moonshot at mbc20.xyz 0x" + "a" * 40
        for gathered in (False, True):
            text = Text.of(raw)
            if gathered:
                assert text.tokens
            got = extract_entities(text, raw, 8)
            assert got == scanned_entities(text.tokens, raw) | word_entities(text.words, raw, 8)
            assert {"token:CLAW", "hashtag:moonshot", "url:mbc20.xyz"} < got


def word_entities(words: list[str], raw: str, min_words: int) -> set[str]:
    """Contracts and the text template, word by word: len and str.isalpha of each word."""
    out = {f"contract:{w}" for w in words if len(raw) >= 32 and len(w) >= 32 and _contract(w)}
    template = list(islice((w for w in words[:64] if w.isalpha()), 40))
    if len(template) >= min_words:
        out.add("text:" + hashlib.blake2b(" ".join(template).encode(), digest_size=6).hexdigest())
    return out


def test_contracts_and_templates_equal_the_word_by_word_rule(moltbook_data: Path) -> None:
    """The contracts and the template read through the text's word lengths and letter mask
    equal the word-by-word rule on real texts and on random ones dense in long words, digits,
    non-ASCII letters and words past the 64th."""
    real = sorted({e.text for e in open_archive([moltbook_data])
                   if isinstance(e, PostEvent)})[::5]
    rng = random.Random(5)
    parts = ["a" * 32, "b" * 31, "9" + "c" * 31, "0x" + "ab" * 20, "é" * 33, "ünï", "word", "42",
             "x1", "ǅz", "ß" * 16, "Σ" * 32, "__", "_" + "k" * 31]
    made = [" ".join(rng.choice(parts) for _ in range(rng.randint(0, 90))) for _ in range(1500)]
    assert len(real) > 200
    for raw in (*real, *made):
        text = Text.of(raw)
        kinds = ("contract:", "text:")
        for min_words in (1, 8):
            got = {e for e in extract_entities(text, raw, min_words) if e.startswith(kinds)}
            assert got == word_entities(text.words, raw, min_words), raw[:80]


def test_established_bar_below_half_still_counts_accounts_after_the_buckets() -> None:
    """An established_factor under 0.5 lowers the accounts bar under an open incident's: two
    accounts flooding an established ticker then pass (the accounts test read before the bucket
    scan must take the lowest bar any bucket count could give)."""
    steady = [post(7000 + k, 600 * k + 1, f"fan{k % 12}", "$GM gm daily $GM check in")
              for k in range(24)]
    jump = [post(8000 + k, 4 * 3600 + 5 * k, f"gm_bot_{k % 2}", "$GM gm daily $GM check in")
            for k in range(40)]
    cfg = SurgeConfig(established_factor=0.4)
    found = run(steady + jump, cfg)
    assert found and found[0].key == "token:GM" and found[0].evidence["novel"] is False
    assert found[0].evidence["distinct_accounts"] < cfg.min_accounts
    assert not run(steady + jump)  # (the default factor: too few accounts)


def tied_flood_findings() -> list[tuple[str, list[str]]]:
    """A flood that carries two hashtags in every post: the two entities tie on every key."""
    flood = [post(9000 + k, 3 * 3600 + 5 * k, f"tied_bot_{k}",
                  f"#zetaflood #alphaflood join the drop now {k}") for k in range(40)]
    found = run(sorted(background() + flood, key=lambda e: e.event_time))
    return [(f.key, f.evidence["related_entities"]) for f in found]


def test_tied_entities_give_the_same_incident_whatever_the_hash_seed() -> None:
    # Which entity hosts an incident must not hang on a set's order, which the string hash
    # seed sets per process: live workers and the replay run in different processes.
    runs = under_hash_seeds("tests.unit.test_detectors_surge", "tied_flood_findings", 6)
    assert len(runs) == 1
    found = runs[0]
    assert found and found[0] == ("hashtag:alphaflood", ["hashtag:zetaflood"])


def test_posts_past_every_judgement_are_dropped() -> None:
    """Memory: once window_s + copost_s old, the posts of an entity not seen since are dropped
    (no judgement reads them), and an entity seen once keeps no word ids nor text."""
    cfg = SurgeConfig(warmup_s=0)
    d = SurgeDetector(cfg)
    events = background(300, span=3600)
    for e in events:
        d.update(Item.of(e))
        d.findings(e.event_time.timestamp())
    end = events[-1].event_time.timestamp() + cfg.window_s + cfg.copost_s
    d.findings(end)
    kept = [p for e in d._entities.values() for p in ([e] if type(e) is _Post else e.posts)]
    assert len(d._entities) > 100 and not [p for p in kept if p.text or len(p.word_ids)]


def test_templates_met_again_are_named_as_when_first_met(monkeypatch) -> None:
    """The template names cached by key (a verbatim repeat is not joined and hashed again) equal
    the word-by-word rule's, met first, met again, and after the full cache is cleared; texts
    whose templates differ in one word, in order or in count get their own names."""
    import detectors.surge as surge

    monkeypatch.setattr(surge, "_TEMPLATES", {})
    monkeypatch.setattr(surge, "_TEMPLATES_MAX", 7)
    rng = random.Random(11)
    words = ["alpha", "beta", "gamma", "delta", "x1", "42", "eps"]
    raws = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 70))) for _ in range(60)]
    raws += ["alpha beta gamma delta eps alpha beta gamma", "beta alpha gamma delta eps alpha "
             "beta gamma", "alpha beta gamma delta eps alpha beta gamma gamma"]
    names = set()
    for raw in raws * 3:
        want = {e for e in word_entities(Text.of(raw).words, raw, 8) if e.startswith("text:")}
        assert {e for e in entities(raw) if e.startswith("text:")} == want, raw
        names |= want
    assert len(surge._TEMPLATES) <= 7 and len(names) > 50


def test_templates_past_novelty_are_held_as_their_last_sighting() -> None:
    """A template first seen more than novel_s before a judgement can never surge again: it is
    reduced to the time it was last seen (no post, bucket or account), a flood of it raises
    nothing, and once expired a template seen again is new (and can surge)."""
    cfg = SurgeConfig(warmup_s=0, novel_s=600, min_threads=1)
    d = SurgeDetector(cfg)
    raw = "the same stock reply that agents post again and again every single day"
    [name] = {e for e in entities(raw) if e.startswith("text:")}
    d.update(Item.of(post(0, 0, "a0", raw)))
    assert d.findings((T0 + timedelta(seconds=700)).timestamp()) == []
    flood = [post(1 + k, 800 + 3 * k, f"bot{k}", raw) for k in range(30)]
    assert run(flood[:1], cfg) == [] and run(flood, cfg) != []  # (new, it would surge)
    for e in flood:
        d.update(Item.of(e))
        assert d.findings(e.event_time.timestamp()) == []
    assert d._entities[name] == flood[-1].event_time.timestamp() and len(d._aging) == 1
    late = flood[-1].event_time.timestamp() + cfg.window_s + cfg.baseline_s + 1
    d.findings(late)
    assert name not in d._entities
    again = [post(100 + k, late - T0.timestamp() + 3 * k, f"bot{k}", raw) for k in range(30)]
    found = []
    for e in again:
        d.update(Item.of(e))
        found += d.findings(e.event_time.timestamp())
    assert found and found[0].key == name
