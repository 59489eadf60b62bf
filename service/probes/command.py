"""``moltscope probe plan|run|status|report|kill``: the probe runner from the command line.

``plan`` prints the schedule of the next writes (a dry run, always safe); ``run`` writes only
with an API key AND ``MOLTSCOPE_PROBES__LIVE=true`` and no kill switch, else it prints why not
and the plan; ``status`` shows the budget, the kill switch and what was posted; ``report``
scores every posted probe (``--archive`` adds an archive's comments on probe posts to the
replies and its posts and agents to the citation check: the replay report of the probes;
``--remember`` adds the figures to the band alert's baseline); ``kill`` sets (or with
``--off`` clears) the kill switch in Redis.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from service.config import Settings, get_settings


def add_probe_parser(sub: Any) -> None:
    p = sub.add_parser("probe", help="probing agents: plan | run | status | report | kill")
    verbs = p.add_subparsers(dest="verb", required=True)
    plan = verbs.add_parser("plan", help="print the next writes (nothing is posted)")
    plan.add_argument("--hours", type=float, default=24.0)
    run = verbs.add_parser("run", help="post on schedule (needs a key and the live switch)")
    run.add_argument("--max-writes", type=int, help="stop after this many writes")
    verbs.add_parser("status", help="budget, kill switch, posted probes, last writes")
    rep = verbs.add_parser("report", help="score every posted probe")
    rep.add_argument("--archive", nargs="*", default=[],
                     help="archives (any replay format) whose comments on probe posts are "
                     "scored too and whose posts and agents count as valid citations")
    rep.add_argument("--out", help="write the full report (with evidence) as JSON here")
    rep.add_argument("--remember", action="store_true",
                     help="add this report's figures to the band alert's baseline")
    rep.add_argument("--embed", action="store_true",
                     help="reply relevance by sentence-embedding cosine (loads the model) "
                     "instead of word overlap")
    kill = verbs.add_parser("kill", help="refuse every probe write (kill switch)")
    kill.add_argument("--off", action="store_true", help="clear the kill switch")
    kill.add_argument("--reason", default="operator")
    p.set_defaults(func=cmd_probe)


def _parts(settings: Settings) -> tuple[Any, Any]:
    import redis

    from service.probes.bank import load_bank
    from service.probes.runner import ProbeRunner
    from service.probes.store import ProbeStore

    store = ProbeStore(redis.Redis.from_url(settings.redis_url), settings.topic_prefix)
    return store, ProbeRunner(settings.probes, store, load_bank(settings.probes.bank_version))


def _print_plan(runner: Any, hours: float) -> None:
    actions = runner.plan(horizon_s=hours * 3600.0)
    b = runner.budget
    print(f"plan for the next {hours:g} h: {len(actions)} writes (budget {b.posts_per_day} "
          f"posts, {b.comments_per_day} comments a day; posts >= {b.post_interval_s:g} s "
          f"apart, comments >= {b.comment_interval_s:g} s)")
    for a in actions:
        print("  " + a.describe())


def cmd_probe(args: argparse.Namespace) -> int:
    settings = get_settings()
    store, runner = _parts(settings)
    if args.verb == "plan":
        print(f"writing: {runner.refusal() or 'allowed'}")
        _print_plan(runner, args.hours)
        return 0
    if args.verb == "run":
        if (why := runner.refusal()) is not None:
            print(f"dry run: {why}")
            _print_plan(runner, 24.0)
            return 0
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        n = runner.run(stop, max_writes=args.max_writes)
        print(f"{n} writes")
        return 0
    if args.verb == "status":
        print(json.dumps(runner.status(), indent=1, default=str))
        return 0
    if args.verb == "kill":
        if args.off:
            store.unkill()
        else:
            store.kill(args.reason)
        print(f"kill switch {'off' if args.off else 'on'}")
        return 0
    return _report(args, settings, store)


def _cosine() -> Any:
    from functools import lru_cache

    from streams.embedding import Embedder

    embedder = Embedder()

    @lru_cache(maxsize=4096)
    def vector(text: str) -> Any:
        return embedder.encode_batch([text])[0]

    return lambda a, b: float(vector(a) @ vector(b))  # unit vectors: the dot is the cosine


def _report(args: argparse.Namespace, settings: Settings, store: Any) -> int:
    from service.probes.lookup import AnyLookup, ArchiveLookup, RedisLookup
    from service.probes.report import campaign_report, tap_replies

    lookups: list[Any] = [RedisLookup(store.r, prefix=settings.topic_prefix,
                                      crawler_prefix=settings.crawler.checkpoint_prefix)]
    extra: dict[str, list[Any]] = {}
    if args.archive:
        from service.sources.archive import open_archive

        # one read: the archive's posts and agents for citations, the probe threads' comments
        lookups.append(ArchiveLookup.from_events(
            tap_replies(open_archive(args.archive), store.post_ids(), extra)))
    report = campaign_report(store, AnyLookup(*lookups), agent_name=settings.probes.agent_name,
                             remember=args.remember,
                             similarity=_cosine() if args.embed else None, extra=extra)
    if args.archive:
        print(f"{report['archive_comments']} comments on probe posts found in the archive")
    for tier, figures in report["summary"].items():
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}
        print(f"tier {tier}: {json.dumps(shown)}")
    for a in report["alerts"]:
        print(f"ALERT {a['message']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"-> {args.out}", file=sys.stderr)
    return 0
