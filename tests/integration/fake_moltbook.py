"""A loopback Moltbook API serving the recorded real answers, with production's faults.

Serves ``GET /posts?sort=new`` (offset or cursor paging, or either per walk), ``GET
/posts/{id}``, ``GET /posts/{id}/comments?sort=&limit=&cursor=``, ``GET /stats`` and ``GET
/agents/profile?name=`` from ``../shared/data/moltbook/api/``. The
platform lives: every request is a tick; posts become visible in creation order
(``initial`` at first, one more every ``release_every`` ticks, so new posts push offset pages
down and pages repeat items as in production); a post's recorded comments appear in creation
order over ``reveal_ticks`` ticks after the post, and its and its comments' vote counts grow
linearly to the recorded ones, so revisits see new comments and count changes. A few
profile agents' recent posts are served as posts too, so some authors have a profile.

The platform's own 60/min sliding minute (``per_minute``, on real time): a request beyond
it gets a 429 with ``Retry-After`` and counts as a violation; answers then carry honest
``X-RateLimit-Remaining`` / ``X-RateLimit-Reset``.

Coverage as in production: ``detail_cap`` keeps only the first comments (tree pre-order) of
a ``GET /posts/{id}`` answer while ``comment_count`` still counts them all; the comments
endpoint answers a flat list (``parent_id`` links) in the asked order (top, new, old,
controversial), at most ``comments_cap`` an answer, paged by ``next_cursor`` when
``comment_paging``; ``GET /stats`` counts the visible posts (plus ``unlisted_posts`` no
listing shows) and their comments. ``redate=(oldest_age_s, newest_age_s)``
moves the recorded posts (which are months old) to ages spread linearly by creation rank
between the two, each post's comments shifted with it (clipped to the present), so a crawler
with its default horizon sees a live platform; ``fresh`` instead creates each post when it
first appears (the wall time of the first request that shows it, a microsecond apart in
release order) with its comments, so the platform's growth after any moment is made of
posts and comments created after it; ``reveal_ticks=0`` serves every comment and
count from the post's first appearance.

Faults (seeded): 429 bursts with ``Retry-After`` + ``X-RateLimit-*`` (every request inside
the announced pause gets a 429 and counts as a violation), header-less 429 blocks (the
per-IP limit; requests during the block are violations), 5xx, answers slower than the
client's timeout, truncated and malformed JSON, pages that repeat or skip items.

The server binds 127.0.0.1 on a free port and stops by itself after ``lifetime_s``.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from service.sources.normalise import parse_time

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "moltbook"


@dataclass
class Faults:
    """Per-request fault probabilities (a request inside a 429 pause gets that 429)."""

    p_429: float = 0.0
    retry_after_s: float = 0.2
    p_429_bare: float = 0.0
    bare_block_s: float = 0.3
    p_5xx: float = 0.0
    p_slow: float = 0.0
    slow_s: float = 0.6
    p_truncated: float = 0.0
    p_malformed: float = 0.0
    p_repeat: float = 0.0
    p_skip: float = 0.0
    burst_429_at: tuple[int, ...] = ()  # ticks that surely start a 429 pause with headers
    bare_429_at: tuple[int, ...] = ()  # ... and a header-less per-IP block


@dataclass
class Logged:
    t: float  # time.monotonic() on arrival
    path: str
    auth: str | None
    fault: str = ""  # "", 429, bare (header-less 429), limit (over per_minute), 5xx, slow, ...
    code: int = 0  # HTTP status sent


def _ts(post: dict[str, Any]) -> float:
    t = parse_time(post["created_at"])
    assert t is not None
    return t.timestamp()


def _comments_in_order(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def walk(nodes: list[dict[str, Any]]) -> None:
        for n in nodes:
            out.append(n)
            walk(n.get("replies") or [])

    walk(tree)
    return sorted(out, key=_ts)


def with_parents(tree: list[dict[str, Any]], parent: str | None = None,
                  ) -> list[tuple[dict[str, Any], str | None]]:
    """Every comment of a tree in pre-order, with its parent's id."""
    out: list[tuple[dict[str, Any], str | None]] = []
    for n in tree:
        out.append((n, parent))
        out += with_parents(n.get("replies") or [], n["id"])
    return out


def preorder(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n, _ in with_parents(tree)]


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 that stops itself after ``lifetime_s``; a context
    manager. Subclasses give the handler class."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], lifetime_s: float) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}/api/v1"
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> Self:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()


class FakeMoltbook(LoopbackServer):
    def __init__(
        self,
        data_dir: Path = DATA,
        *,
        paging: str = "offset",
        initial: int = 40,
        release_every: int = 2,
        reveal_ticks: int = 150,
        profile_posts: int = 8,
        faults: Faults | None = None,
        seed: int = 0,
        lifetime_s: float = 120.0,
        per_minute: float | None = None,
        redate: tuple[float, float] | None = None,
        detail_cap: int | None = None,
        comments_cap: int = 500,
        comment_paging: bool = True,
        unlisted_posts: int = 0,
        fresh: bool = False,
    ) -> None:
        assert paging in ("offset", "cursor", "mixed")
        self.paging = paging
        self.initial, self.release_every, self.reveal_ticks = initial, release_every, reveal_ticks
        self.faults = faults or Faults()
        # one draw a request for the faults, paging draws apart: the n-th request's fault
        # depends on the seed alone, not on how many list pages came before it
        self._rng = random.Random(seed)
        self._paging_rng = random.Random(f"{seed}:paging")
        self._lock = threading.Lock()
        self.tick = 0
        self.log: list[Logged] = []
        self.violations = 0
        self.served_429 = 0
        self._pause_until = 0.0
        self._pause_kind = ""
        self._lifetime_s = lifetime_s
        self.per_minute = per_minute
        self._window: deque[float] = deque()  # arrivals within the last 60 s
        self.over_limit = 0
        self.detail_cap, self.comments_cap = detail_cap, comments_cap
        self.comment_paging, self.unlisted_posts = comment_paging, unlisted_posts
        self.fresh, self._born = fresh, 0  # posts of ``order`` created so far (fresh)

        api = data_dir / "api"
        self.payloads: dict[str, dict[str, Any]] = {}
        for f in sorted((api / "posts").glob("*.json")):
            d = json.loads(f.read_text())
            self.payloads[d["post"]["id"]] = {k: v for k, v in d.items() if not k.startswith("_")}
        self.profiles: dict[str, dict[str, Any]] = {}
        for line in (api / "agent-profiles.jsonl").read_text().splitlines():
            a = json.loads(line)
            self.profiles[a["name"]] = a
            recent = a.get("_recent_posts") or []
            if recent and profile_posts > 0 and recent[0]["id"] not in self.payloads:
                profile_posts -= 1
                post = {**recent[0], "author": {"id": a.get("id"), "name": a["name"]}}
                self.payloads[post["id"]] = {"success": True, "post": post, "comments": []}
        # release order = creation order; sort=new shows the newest first
        self.order = sorted(self.payloads, key=lambda pid: (_ts(self.payloads[pid]["post"]), pid))
        if redate is not None:
            self._redate(*redate)
        if fresh:
            self.payloads = copy.deepcopy(self.payloads)
        self._appear = {pid: max(0, (i - initial + 1) * release_every)
                        for i, pid in enumerate(self.order)}
        self._comments = {pid: _comments_in_order(p.get("comments") or [])
                          for pid, p in self.payloads.items()}
        self.full_tick = max(self._appear.values()) + reveal_ticks

        self._serve(self._handler(), lifetime_s)

    def _redate(self, oldest_age_s: float, newest_age_s: float) -> None:
        now = time.time()
        n = max(1, len(self.order) - 1)

        def iso(t: float) -> str:
            return datetime.fromtimestamp(t, UTC).isoformat()

        for rank, pid in enumerate(self.order):
            payload = self.payloads[pid] = copy.deepcopy(self.payloads[pid])
            new = now - oldest_age_s + (oldest_age_s - newest_age_s) * rank / n
            shift = new - _ts(payload["post"])
            payload["post"]["created_at"] = iso(new)
            for c in _comments_in_order(payload.get("comments") or []):  # the tree's own dicts
                c["created_at"] = iso(min(now - 1.0, max(new, _ts(c) + shift)))

    def _birth(self, tick: int) -> None:
        """``fresh``: posts appearing at ``tick`` are created now, their comments with them."""
        now = time.time()
        for i in range(self._born, len(self.visible(tick))):
            payload = self.payloads[self.order[i]]
            born = datetime.fromtimestamp(now + i * 1e-6, UTC).isoformat()
            for node in [payload["post"], *preorder(payload.get("comments") or [])]:
                node["created_at"] = born
            self._born = i + 1

    # -------------------------------------------------------------- the living platform

    def _fraction(self, pid: str, tick: int) -> float:
        if self.reveal_ticks <= 0:
            return 1.0
        return min(1.0, max(0.0, (tick - self._appear[pid]) / self.reveal_ticks))

    def visible(self, tick: int) -> list[str]:
        """Visible post ids, newest first."""
        n = min(len(self.order), self.initial + tick // self.release_every)
        return self.order[:n][::-1]

    def _scaled(self, obj: dict[str, Any], f: float) -> dict[str, Any]:
        out = dict(obj)
        for k in ("upvotes", "downvotes", "comment_count"):
            if isinstance(out.get(k), int):
                out[k] = round(out[k] * f)
        return out

    def detail(self, pid: str, tick: int) -> dict[str, Any]:
        f = self._fraction(pid, tick)
        payload = self.payloads[pid]
        comments = self._comments[pid]
        shown = {c["id"] for c in comments[: math.ceil(f * len(comments))]}
        if self.detail_cap is not None:  # the first of the tree, in pre-order
            order = [c["id"] for c in preorder(payload.get("comments") or []) if c["id"] in shown]
            shown = set(order[: self.detail_cap])

        def prune(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{**self._scaled(n, f), "replies": prune(n.get("replies") or [])}
                    for n in nodes if n["id"] in shown]

        out = {**payload, "post": self._scaled(payload["post"], f)}
        if "comments" in payload:
            out["comments"] = prune(payload["comments"])
        return out

    def comments_page(self, pid: str, query: dict[str, str], tick: int) -> dict[str, Any]:
        """``GET /posts/{id}/comments``: the revealed comments, flat, in the asked order."""
        f = self._fraction(pid, tick)
        comments = self._comments[pid]
        flat = [{**{k: v for k, v in self._scaled(c, f).items() if k != "replies"},
                 "parent_id": parent} for c, parent in with_parents(
                     self.payloads[pid].get("comments") or [])
                if c["id"] in {x["id"] for x in comments[: math.ceil(f * len(comments))]}]
        key = {"top": lambda c: (-c.get("upvotes", 0), c["created_at"], c["id"]),
               "controversial": lambda c: (-c.get("downvotes", 0), c["created_at"], c["id"]),
               "old": lambda c: (c["created_at"], c["id"])}.get(query.get("sort", "top"))
        flat.sort(key=key or (lambda c: (c["created_at"], c["id"])),
                  reverse=key is None)  # new: newest first
        start = int(query.get("cursor", "0")) if self.comment_paging else 0
        size = min(int(query.get("limit", "100")), 500, self.comments_cap)
        page = flat[start:start + size]
        more = self.comment_paging and start + size < len(flat)
        return {"success": True, "comments": page, "count": len(page), "has_more": more,
                "next_cursor": str(start + size) if more else None}

    def stats(self, tick: int) -> dict[str, Any]:
        vis = self.visible(tick)
        return {"success": True, "agents": len(self.profiles), "submolts": 1,
                "posts": len(vis) + self.unlisted_posts,
                "comments": sum(self._scaled(self.payloads[p]["post"],
                                             self._fraction(p, tick)).get("comment_count") or 0
                                for p in vis)}

    def list_item(self, pid: str, tick: int) -> dict[str, Any]:
        post = self._scaled(self.payloads[pid]["post"], self._fraction(pid, tick))
        author = post.get("author")
        post["author"] = ({"id": author.get("id"), "name": author.get("name")}
                          if isinstance(author, dict) else None)
        return post

    def _page(self, query: dict[str, str], tick: int) -> dict[str, Any]:
        limit = int(query.get("limit", "25"))
        vis = self.visible(tick)
        rng = self._paging_rng
        form = self.paging
        if form == "mixed":
            form = ("cursor" if "cursor" in query else "offset" if "offset" in query
                    else rng.choice(["offset", "cursor"]))
        if form == "cursor" and "cursor" in query:
            key = tuple(json.loads(base64.urlsafe_b64decode(query["cursor"])))
            start = next((i for i, pid in enumerate(vis)
                          if (_ts(self.payloads[pid]["post"]), pid) < key), len(vis))
        else:
            start = int(query.get("offset", "0"))
        if rng.random() < self.faults.p_repeat:
            start = max(0, start - rng.randint(1, 3))
        ids = vis[start:start + limit]
        end = start + len(ids)
        if len(ids) > 2 and rng.random() < self.faults.p_skip:  # an item this page drops
            ids.pop(rng.randrange(1, len(ids) - 1))
        posts = [self.list_item(pid, tick) for pid in ids]
        has_more = end < len(vis)
        if form == "cursor":
            last = vis[end - 1] if end else None
            cursor = (base64.urlsafe_b64encode(json.dumps(
                [_ts(self.payloads[last]["post"]), last]).encode()).decode()
                if last and has_more else None)
            return {"success": True, "posts": posts, "has_more": has_more, "next_cursor": cursor}
        nxt = end
        if rng.random() < self.faults.p_skip:
            nxt += rng.randint(1, 2)
        return {"success": True, "posts": posts, "count": len(posts), "has_more": has_more,
                "next_offset": nxt, "authenticated": False}

    # -------------------------------------------------------------- HTTP

    def _answer(self, path: str, query: dict[str, str], tick: int) -> tuple[int, Any]:
        if path == "/api/v1/posts":
            return 200, self._page(query, tick)
        if path == "/api/v1/stats":
            return 200, self.stats(tick)
        if path.startswith("/api/v1/posts/") and path.endswith("/comments"):
            pid = path.split("/")[-2]
            if pid in self.payloads and self._appear[pid] <= tick:
                return 200, self.comments_page(pid, query, tick)
            return 404, {"success": False, "error": "Post not found"}
        if path.startswith("/api/v1/posts/"):
            pid = path.rsplit("/", 1)[1]
            if pid in self.payloads and self._appear[pid] <= tick:
                return 200, self.detail(pid, tick)
            return 404, {"success": False, "error": "Post not found"}
        if path == "/api/v1/agents/profile":
            a = self.profiles.get(query.get("name", ""))
            if a is None:
                return 404, {"success": False, "error": "Agent not found",
                             "hint": "Check the agent name"}
            agent = {k: v for k, v in a.items() if not k.startswith("_")}
            return 200, {"success": True, "agent": agent,
                         "recentPosts": a.get("_recent_posts") or [],
                         "recentComments": a.get("_recent_comments") or []}
        return 404, {"success": False, "error": "Not found"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else 40 ms delayed-ACK stalls per answer

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                now = time.monotonic()
                split = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                f = fake.faults
                with fake._lock:
                    rng = fake._rng
                    entry = Logged(now, self.path, self.headers.get("Authorization"))
                    fake.log.append(entry)
                    window = fake._window
                    while window and window[0] <= now - 60.0:
                        window.popleft()
                    window.append(now)
                    limit = fake.per_minute
                    if limit is not None and len(window) > limit:
                        fake.violations += 1
                        fake.over_limit += 1
                        kind = "limit"
                    elif now < fake._pause_until:
                        fake.violations += 1
                        kind = "bare" if fake._pause_kind == "bare" else "429"
                    else:
                        r = rng.random()
                        edges = [("429", f.p_429), ("bare", f.p_429_bare), ("5xx", f.p_5xx),
                                 ("slow", f.p_slow), ("trunc", f.p_truncated),
                                 ("malformed", f.p_malformed)]
                        kind = ("429" if fake.tick in f.burst_429_at
                                else "bare" if fake.tick in f.bare_429_at else "ok")
                        for name, p in edges if kind == "ok" else ():
                            if r < p:
                                kind = name
                                break
                            r -= p
                        if kind == "429":
                            fake._pause_until, fake._pause_kind = now + f.retry_after_s, "429"
                        elif kind == "bare":
                            fake._pause_until, fake._pause_kind = now + f.bare_block_s, "bare"
                    tick = fake.tick
                    fake.tick += 1
                    if fake.fresh:
                        fake._birth(tick)
                    if kind == "ok" or kind in ("slow", "trunc", "malformed"):
                        status, obj = fake._answer(split.path, query, tick)
                    entry.fault = "" if kind == "ok" else kind
                    entry.code = {"429": 429, "bare": 429, "limit": 429, "5xx": 503}.get(kind, 0)
                    if kind in ("429", "bare", "limit"):
                        fake.served_429 += 1
                    rate = {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "59"}
                    free_in = 0.0
                    if limit is not None:  # honest: what is left of the minute, when it frees
                        if len(window) >= limit:
                            free_in = max(0.0, window[-int(limit)] + 60.0 - now)
                        rate = {"X-RateLimit-Limit": f"{limit:g}",
                                "X-RateLimit-Remaining": str(max(0, int(limit) - len(window))),
                                "X-RateLimit-Reset": str(math.ceil(time.time() + free_in))}
                try:
                    if kind == "429":
                        reset = math.ceil(time.time() + f.retry_after_s)
                        self._send(429, json.dumps({"success": False,
                                                    "error": "Rate limit exceeded"}).encode(),
                                   {"Retry-After": f"{f.retry_after_s}",
                                    "X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0",
                                    "X-RateLimit-Reset": str(reset)})
                    elif kind == "limit":
                        self._send(429, json.dumps({"success": False,
                                                    "error": "Rate limit exceeded"}).encode(),
                                   {**rate, "Retry-After": f"{math.ceil(free_in)}"})
                    elif kind == "bare":
                        self._send(429, b'{"success":false,"error":"Too many requests"}', {})
                    elif kind == "5xx":
                        self._send(503, b"<html><body>503 Service Unavailable</body></html>",
                                   {})
                    else:
                        if kind == "slow":
                            time.sleep(f.slow_s)
                        body = json.dumps(obj).encode()
                        if kind == "trunc":
                            body = body[: len(body) // 2]
                        elif kind == "malformed":
                            body = b'{"success": true, "posts": [{"id": ' + b"\x00garbage"
                        entry.code = status
                        self._send(status, body, rate)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) first

        return Handler
