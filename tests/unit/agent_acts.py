"""Acts for the per-agent engine tests, from real Moltbook data and from synthetic societies.

Vectors: a deterministic cheap stand-in for the MiniLM embedding, a hashed bag of words
(each word token of the one tokeniser adds +-1 at a blake2b-chosen coordinate; then unit
length, float32), so that texts that share words have similar vectors as real embeddings do.
The engines only need unit vectors; the real model would make the tests slow.

- :func:`profile_acts`: the real agents of ``api/agent-profiles.jsonl``: their archived recent
  posts (18 agents with 10 to 20), their real scores (upvotes - downvotes, as a score act an
  hour after the post) and their recent comments (``v*``: the commented post's title).
- :func:`realtext_acts`: the acts of ``bench/realtext.py``'s real-text stream (real texts,
  resampled authors and threads; its vote changes on posts become score acts).
- :func:`synthetic_acts`: simulator-like agents posting on a topic mixture, voting noise, and
  comments on other agents' posts.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from datetime import datetime
from functools import cache
from pathlib import Path

import numpy as np

from streams.acts import Act
from streams.events import CommentEvent, PostEvent, VoteEvent
from streams.text import Text

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "moltbook"
DIM = 64


@cache
def _slot(token: str) -> tuple[int, float]:
    h = hashlib.blake2b(token.encode(), digest_size=8).digest()
    return h[0] % DIM, 1.0 if h[1] & 1 else -1.0


def hash_vector(text: str) -> np.ndarray:
    v = np.zeros(DIM)
    for tok in Text.of(text).tokens:
        if tok[0].isalnum():
            i, s = _slot(tok)
            v[i] += s
    n = np.linalg.norm(v)
    if n == 0.0:  # no word: one stable coordinate, still a unit vector
        v[_slot(text)[0]] = 1.0
        n = 1.0
    return (v / n).astype(np.float32)


def _t(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


@cache
def profile_acts() -> tuple[Act, ...]:
    out: list[Act] = []
    for line in (DATA / "api" / "agent-profiles.jsonl").open():
        row = json.loads(line)
        name = row["name"]
        for p in row.get("_recent_posts") or []:
            t = _t(p["created_at"])
            text = f"{p.get('title') or ''}\n{p.get('content') or ''}".strip()
            out.append(Act(name, t, "post", p["id"], p["id"], vector=hash_vector(text)))
            score = int(p.get("upvotes") or 0) - int(p.get("downvotes") or 0)
            out.append(Act(name, t + 3600.0, "score", p["id"], p["id"], target_kind="post",
                           score=score))
        for c in row.get("_recent_comments") or []:
            post = c.get("post") or {}
            if not isinstance(post, dict) or not post.get("id"):
                continue
            out.append(Act(name, _t(c["created_at"]), "comment", post["id"], c["id"],
                           target_vector=hash_vector(post.get("title") or "")))
    return tuple(out)


@cache
def realtext_acts(n_events: int = 20_000, seed: int = 4, scale: float = 0.002) -> tuple[Act, ...]:
    """A small ``scale`` concentrates the stream on few agents, so many reach 10 to 100 posts."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import realtext

    out: list[Act] = []
    posts: dict[str, tuple[str | None, np.ndarray]] = {}
    for e in realtext.stream(n_events, seed=seed, scale=scale):
        t = e.event_time.timestamp()
        if isinstance(e, PostEvent):
            v = hash_vector(e.text)
            posts[e.post_id] = (e.author, v)
            if e.author is not None:
                out.append(Act(e.author, t, "post", e.post_id, e.post_id, vector=v))
        elif isinstance(e, CommentEvent) and e.author is not None:
            author, v = posts.get(e.post_id, (None, None))
            out.append(Act(e.author, t, "comment", e.post_id, e.comment_id,
                           target_author=e.reply_to or author, target_vector=v))
        elif isinstance(e, VoteEvent) and e.target == "post":
            author = posts.get(e.post_id, (None, None))[0]
            if author is not None:
                out.append(Act(author, t, "score", e.post_id, e.target_id, target_kind="post",
                               score=e.upvotes - e.downvotes))
    return tuple(out)


def synthetic_acts(agents: int = 40, posts: int = 60, seed: int = 0, dim: int = 32,
                   t0: float = 1769904000.0) -> list[Act]:
    """Agents post ``posts`` times about a personal topic mixture moving slowly; each post
    gets a few score changes over two days; each agent comments on others' posts."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    topics = rng.normal(size=(8, dim))
    out: list[Act] = []
    every: list[tuple[str, str, np.ndarray]] = []
    for a in range(agents):
        name = f"agent{a}"
        w0, w1 = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
        t = t0 + rng.uniform(0, 3600)
        for k in range(posts):
            w = w0 + (w1 - w0) * k / posts
            v = w @ topics + rng.normal(scale=0.8, size=dim)
            v = (v / np.linalg.norm(v)).astype(np.float32)
            pid = f"{name}.p{k}"
            out.append(Act(name, t, "post", pid, pid, vector=v))
            every.append((name, pid, v))
            score = 0
            for j in range(int(rng.integers(0, 4))):
                score += int(rng.integers(-2, 5))
                out.append(Act(name, t + 600.0 * (j + 1) * rng.uniform(1, 60), "score", pid, pid,
                               target_kind="post", score=score))
            t += rng.exponential(3 * 3600)
    for a in range(agents):
        name = f"agent{a}"
        for k in range(posts // 3):
            author, pid, v = pick.choice(every)
            if author == name:
                continue
            t = t0 + pick.uniform(0, posts * 3 * 3600)
            out.append(Act(name, t, "comment", pid, f"{name}.c{k}", target_author=author,
                           target_vector=v))
    return out
