"""Streaming archive readers for replay: files in, canonical events out, in event-time order.

Formats, recognised by name and, where the name says nothing, by content:

* a directory, ``.tar``, ``.tar.gz`` / ``.tgz`` of JSON answers (one a file): ``GET /posts/{id}``
  answers, ``GET /posts`` envelopes or agent profiles, told apart by their keys;
  other files inside a directory are read as their own sources;
* ``.json``: one such answer; ``.jsonl`` / ``.ndjson`` (optionally ``.gz``): one a line, or
  canonical events (lines with a ``kind``, read with :func:`~streams.events.parse_event`);
* observatory tables ``.csv`` (optionally ``.gz``) and ``.parquet`` (read in record batches):
  posts, comments, agents, submolts, by the table name in the file name, else by the header.

Memory is constant in file size: every reader streams (lines, CSV rows, Parquet batches,
tar members) and the sort holds at most ``sort_buffer`` events a source (about 2 KB an
event with a short text: ~20 MB a source at the default 10,000). One exception, opt-out
with ``link_tables=False``: when observatory tables are replayed, a first pass
builds the lookups the normaliser needs (post id -> author when comments tables are present,
agent id -> name from agents tables, comment id -> (author, parent) for reply chains),
about 270 bytes an entry (measured by ``bench/bench_normalise.py``).

Order: :func:`open_archive` merges per-source iterators with :func:`heapq.merge` on
``(event_time, kind rank, id)`` (submolts and agents before posts, posts before comments at
equal times). A source is sorted through a bounded reorder buffer of ``sort_buffer`` events:
input already sorted comes out unchanged; disorder within the buffer (one post answer's
comments, the files of a directory in uuid order while they fit the buffer) is repaired.
An event older than one the source already released is *late*: it is yielded at once,
never dropped, and counted in
:attr:`ArchiveStats.late` -- raise ``sort_buffer`` or pre-sort such a file (e.g. a table in
descending time order larger than the buffer). Dead letters bypass the sort and the merge:
they are yielded as soon as their source meets them.

Dead-letter reasons added here (beside :data:`service.sources.normalise.REASONS`):
``unknown_format`` (a file or member no reader recognises; raw = its name) and
``unreadable`` (I/O or decompression error; raw = the error).
"""

from __future__ import annotations

import csv
import gzip
import heapq
import io
import json
import os
import tarfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq
from pydantic import ValidationError

from service.sources.normalise import (
    DEFAULT_MAX_TEXT,
    Item,
    normalise_agent_profile,
    normalise_archive_row,
    normalise_post_detail,
    normalise_posts_list,
    parse_time,
    raw_text,
    table_of,
)
from streams.events import DeadLetter, Event, parse_event

Progress = Callable[[int], None]
KIND_RANK = {"submolt": 0, "agent": 1, "post": 2, "comment": 3, "vote": 4}
DEFAULT_SORT_BUFFER = 10_000
PARQUET_BATCH = 4_096
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
_CSV_SUFFIXES = (".csv", ".csv.gz")


@dataclass
class ArchiveStats:
    """What a replay met: sources opened, events, dead letters, late (out-of-buffer) events."""

    sources: int = 0
    events: int = 0
    dead_letters: int = 0
    late: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


def sort_key(event: Event) -> tuple[datetime, int, str]:
    """Replay order: event time, then entities before activity, then id (deterministic)."""
    return event.event_time, KIND_RANK.get(event.kind, 9), event.id


# ---------------------------------------------------------------- byte counting


class _Counting(io.RawIOBase):
    """A binary file that reports every byte read, so a bar can show bytes read / total."""

    def __init__(self, raw: IO[bytes], progress: Progress | None) -> None:
        self._raw = raw
        self._progress = progress

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        if n and self._progress is not None:
            self._progress(n)
        return n or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


@contextmanager
def _open_bytes(path: Path, progress: Progress | None) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed if ``.gz``; progress counts bytes on disk."""
    with io.BufferedReader(_Counting(path.open("rb"), progress), buffer_size=1 << 16) as f:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(fileobj=f) as unzipped:
                yield unzipped  # type: ignore[misc]
        else:
            yield f


def archive_size(paths: Iterable[str | Path]) -> int:
    """Total bytes on disk of what :func:`open_archive` will read (a progress bar's total)."""
    total = 0
    for p in map(Path, paths):
        if p.is_dir():
            total += sum(f.stat().st_size for f in _walk(p))
        elif p.exists():
            total += p.stat().st_size
    return total


def _walk(root: Path) -> Iterator[Path]:
    """Files under ``root`` in name order, one directory listing in memory at a time."""
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir():
            yield from _walk(Path(entry.path))
        elif entry.is_file():
            yield Path(entry.path)


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)


# ---------------------------------------------------------------- JSON answers


def normalise_json_document(
    data: bytes | str | dict[str, Any],
    *,
    origin: str,
    observed_at: datetime | None = None,
    max_text: int = DEFAULT_MAX_TEXT,
) -> list[Item]:
    """One archived JSON document, whatever it is: a canonical event (has ``kind``), a
    ``GET /posts/{id}`` answer (``post``), a ``GET /posts`` envelope (``posts``) or an agent
    profile (``agent``, or a top-level ``name``)."""
    marker = b'"kind"' if isinstance(data, bytes) else '"kind"'
    if isinstance(data, str | bytes) and marker in data:  # type: ignore[operator]
        # Fast path for canonical events: pydantic parses the JSON itself.
        with suppress(ValidationError):
            return [parse_event(data)]
    try:
        doc = json.loads(data) if isinstance(data, str | bytes) else data
    except ValueError:
        return [_dead("bad_json", data, origin, observed_at)]
    if not isinstance(doc, dict):
        return [_dead("bad_shape", data, origin, observed_at)]
    # The archiver's own stamp beats the file's mtime; a broken stamp keeps the default.
    with suppress(ValueError, OverflowError, OSError):
        observed_at = parse_time(doc.get("_downloaded_at")) or observed_at
    kw: dict[str, Any] = {"origin": origin, "observed_at": observed_at, "max_text": max_text}
    if "kind" in doc:
        try:
            return [parse_event(doc)]
        except ValidationError:
            return [_dead("bad_shape", doc, origin, observed_at)]
    if "post" in doc:
        return normalise_post_detail(doc, source="archive", **kw)
    if "posts" in doc:
        return normalise_posts_list(doc, source="archive", **kw)
    if "agent" in doc or "name" in doc or doc.get("success") is False:
        return normalise_agent_profile(doc, source="archive", **kw)
    return [_dead("bad_shape", doc, origin, observed_at)]


def _dead(reason: str, raw: Any, origin: str, observed_at: datetime | None) -> DeadLetter:
    return DeadLetter(
        reason=reason,
        raw=raw_text(raw),
        origin=origin,
        observed_at=observed_at or datetime.now(UTC),
    )


def read_json_file(
    path: Path, *, progress: Progress | None = None, max_text: int = DEFAULT_MAX_TEXT
) -> Iterator[Item]:
    """One ``.json`` file (a single document), in document order."""
    with _open_bytes(path, progress) as f:
        data = f.read()
    yield from normalise_json_document(
        data, origin=str(path), observed_at=_mtime(path), max_text=max_text
    )


def read_jsonl(
    path: Path, *, progress: Progress | None = None, max_text: int = DEFAULT_MAX_TEXT
) -> Iterator[Item]:
    """JSON Lines: canonical events or archived answers, one a line, in file order.

    A bad line becomes a dead letter whose origin is ``<path>:<line number>``.
    """
    observed = _mtime(path)
    with _open_bytes(path, progress) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield from normalise_json_document(
                    line, origin=f"{path}:{number}", observed_at=observed, max_text=max_text
                )


def read_post_answers(
    path: Path, *, progress: Progress | None = None, max_text: int = DEFAULT_MAX_TEXT
) -> Iterator[Item]:
    """A ``.tar``/``.tar.gz`` (streamed, member by member) or directory of JSON answers.

    In a directory only ``*.json`` files are read here; :func:`open_archive` gives the
    directory's other files to their own readers.
    """
    observed = _mtime(path)
    if path.is_dir():
        for f in _walk(path):
            if f.name.endswith(".json"):
                yield from read_json_file(f, progress=progress, max_text=max_text)
        return
    try:
        with _open_bytes(path, progress) as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                origin = f"{path}:{member.name}"
                if not member.name.endswith(".json"):
                    yield _dead("unknown_format", member.name, origin, observed)
                    continue
                fileobj = tar.extractfile(member)
                data = fileobj.read() if fileobj is not None else b""
                yield from normalise_json_document(
                    data, origin=origin, observed_at=observed, max_text=max_text
                )
    except (tarfile.TarError, OSError, EOFError) as exc:
        yield _dead("unreadable", repr(exc), str(path), observed)


# ---------------------------------------------------------------- observatory tables


class CommentIndex(Mapping[str, tuple[str | None, int]]):
    """comment id -> (author, depth), the depth found by walking ``parent_id`` links."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[str | None, str | None]] = {}

    def add(self, comment_id: str, author: str | None, parent_id: str | None) -> None:
        self._nodes[comment_id] = (author, parent_id)

    def __getitem__(self, comment_id: str) -> tuple[str | None, int]:
        author, parent = self._nodes[comment_id]
        depth, seen = 1, {comment_id}
        while parent is not None and parent in self._nodes and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = self._nodes[parent][1]
        if parent is not None and parent not in self._nodes:
            depth += 1  # the chain leaves the archive: count the missing parent once
        return author, depth

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


@dataclass
class TableLinks:
    """Lookups across observatory tables that :func:`normalise_archive_row` takes."""

    post_authors: dict[str, str] = field(default_factory=dict)
    agent_names: dict[str, str] = field(default_factory=dict)
    comment_parents: CommentIndex = field(default_factory=CommentIndex)


def _table_rows(path: Path, progress: Progress | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a CSV or Parquet table as dicts, streamed (Parquet in record batches)."""
    if path.name.endswith(".parquet"):
        pf = pq.ParquetFile(path)
        rows_total = max(pf.metadata.num_rows, 1)
        size = path.stat().st_size
        done = 0
        for group in range(pf.num_row_groups):
            for batch in pf.iter_batches(batch_size=PARQUET_BATCH, row_groups=[group]):
                if progress is not None:  # pyarrow reads itself: report bytes pro rata of rows
                    before = done * size // rows_total
                    done += batch.num_rows
                    progress(done * size // rows_total - before)
                yield from batch.to_pylist()
        return
    # Long posts exceed csv's 128 KiB field default; the normaliser dead-letters oversized text.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 26))
    with _open_bytes(path, progress) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
        yield from csv.DictReader(text)


def _table_columns(path: Path) -> list[str]:
    if path.name.endswith(".parquet"):
        return list(pq.ParquetFile(path).schema_arrow.names)
    with _open_bytes(path, None) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
        return next(csv.reader(text), [])


def table_kind(path: Path) -> str | None:
    """posts | comments | agents | submolts, by file name, else by the header's columns."""
    by_name = table_of(path.name)
    if by_name is not None:
        return by_name
    cols = set(_table_columns(path))
    if "post_id" in cols:
        return "comments"
    if "title" in cols:
        return "posts"
    if "subscriber_count" in cols:
        return "submolts"
    if "name" in cols and cols & {"karma", "first_seen_at", "follower_count"}:
        return "agents"
    return None


def build_links(tables: Iterable[tuple[Path, str]]) -> TableLinks:
    """First pass over observatory tables: only the columns the lookups need are kept."""
    tables = list(tables)
    links = TableLinks()
    kinds = {kind for _, kind in tables}
    for path, kind in tables:
        if kind == "agents":
            for row in _table_rows(path):
                if row.get("id") and row.get("name"):
                    links.agent_names[str(row["id"])] = str(row["name"])
    for path, kind in tables:
        if kind == "posts" and "comments" in kinds:
            for row in _table_rows(path):
                author = row.get("agent_name") or links.agent_names.get(str(row.get("agent_id")))
                if row.get("id") and author:
                    links.post_authors[str(row["id"])] = str(author)
        elif kind == "comments":
            for row in _table_rows(path):
                author = row.get("agent_name") or links.agent_names.get(str(row.get("agent_id")))
                if row.get("id"):
                    parent = row.get("parent_id") or None
                    links.comment_parents.add(
                        str(row["id"]), author or None, str(parent) if parent else None
                    )
    return links


def read_table(
    path: Path,
    table: str | None = None,
    *,
    links: TableLinks | None = None,
    observed_at: datetime | None = None,
    progress: Progress | None = None,
    max_text: int = DEFAULT_MAX_TEXT,
) -> Iterator[Item]:
    """An observatory table (CSV or Parquet), row by row, in file order.

    ``observed_at`` is the default for rows without ``fetched_at`` (default: the file's mtime).
    """
    kind = table or table_kind(path)
    observed = observed_at or _mtime(path)
    if kind is None:
        yield _dead("unknown_format", path.name, str(path), observed)
        return
    links = links or TableLinks()
    for number, row in enumerate(_table_rows(path, progress), 2):  # line 1 is the header
        yield from normalise_archive_row(
            kind,
            row,
            origin=f"{path}:{number}",
            observed_at=observed,
            max_text=max_text,
            post_authors=links.post_authors,
            agent_names=links.agent_names,
            comment_parents=links.comment_parents,
        )


# ---------------------------------------------------------------- dispatch and merge


def source_kind(path: Path) -> str:
    """Which reader a path needs: answers | json | jsonl | table | unknown."""
    name = path.name.lower()
    if path.is_dir() or name.endswith(_TAR_SUFFIXES):
        return "answers"
    if name.endswith(".json"):
        return "json"
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith((*_CSV_SUFFIXES, ".parquet")):
        return "table"
    return "unknown"


def read_source(
    path: str | Path,
    *,
    links: TableLinks | None = None,
    observed_at: datetime | None = None,
    progress: Progress | None = None,
    max_text: int = DEFAULT_MAX_TEXT,
) -> Iterator[Item]:
    """Every item of one path, in file order (unsorted): the per-source reader dispatch."""
    path = Path(path)
    kind = source_kind(path)
    kw: dict[str, Any] = {"progress": progress, "max_text": max_text}
    try:
        if kind == "answers":
            yield from read_post_answers(path, **kw)
        elif kind == "json":
            yield from read_json_file(path, **kw)
        elif kind == "jsonl":
            yield from read_jsonl(path, **kw)
        elif kind == "table":
            yield from read_table(path, links=links, observed_at=observed_at, **kw)
        else:
            yield _dead("unknown_format", path.name, str(path), observed_at)
    except (OSError, EOFError, csv.Error, UnicodeDecodeError, ValueError) as exc:
        # ValueError covers pyarrow's ArrowInvalid: a corrupt file ends its source, not the run
        yield _dead("unreadable", repr(exc), str(path), observed_at)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Sources to read: a directory is one source for its JSON answers (if it has any)
    plus one source per other file inside it; other paths are themselves."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            out.append(p)
            continue
        others = [f for f in _walk(p) if not f.name.endswith(".json")]
        if any(f.name.endswith(".json") for f in _walk(p)):
            out.append(p)
        out.extend(others)
    return out


def bounded_sort(
    items: Iterable[Event], buffer: int, stats: ArchiveStats | None = None
) -> Iterator[Event]:
    """Sort ``items`` by :func:`sort_key` holding at most ``buffer`` of them.

    Exact when no item is more than ``buffer`` places out of order; an item older than one
    already released is yielded at once (late) and counted in ``stats.late``.

    >>> from datetime import timedelta
    >>> from streams.events import PostEvent
    >>> t = datetime(2026, 2, 1, tzinfo=UTC)
    >>> ev = [PostEvent(id=f"post:{m}", event_time=t + timedelta(minutes=m), observed_at=t,
    ...                 post_id=str(m), author="a") for m in (3, 1, 2, 0)]
    >>> [e.post_id for e in bounded_sort(ev, 2)]  # '0' is 3 places late: out of a 2-buffer
    ['1', '0', '2', '3']
    """
    heap: list[tuple[tuple[datetime, int, str], int, Event]] = []
    last: tuple[datetime, int, str] | None = None
    for n, item in enumerate(items):
        key = sort_key(item)
        if last is not None and key < last:
            if stats is not None:
                stats.late += 1
            yield item
            continue
        heapq.heappush(heap, (key, n, item))
        if len(heap) > buffer:
            last, _, out = heapq.heappop(heap)
            yield out
    while heap:
        yield heapq.heappop(heap)[2]


def open_archive(
    paths: Iterable[str | Path],
    *,
    progress: Progress | None = None,
    sort_buffer: int = DEFAULT_SORT_BUFFER,
    observed_at: datetime | None = None,
    max_text: int = DEFAULT_MAX_TEXT,
    link_tables: bool = True,
    stats: ArchiveStats | None = None,
) -> Iterator[Item]:
    """Replay archives: every event of every path, merged in event-time order.

    ``progress(n)`` is called with each count of bytes read (total: :func:`archive_size`;
    the first pass that builds table lookups is not counted).
    ``observed_at`` is the default observation time of table rows without ``fetched_at``
    (default: each file's mtime). Dead letters come out as soon as they are met.
    """
    stats = stats if stats is not None else ArchiveStats()
    expanded = expand_paths(paths)
    tables = [(p, table_kind(p)) for p in expanded if source_kind(p) == "table"]
    known = [(p, k) for p, k in tables if k is not None]
    links = build_links(known) if link_tables and known else None
    dead: deque[DeadLetter] = deque()

    def events_of(path: Path) -> Iterator[Event]:
        stats.sources += 1
        for item in read_source(
            path, links=links, observed_at=observed_at, progress=progress, max_text=max_text
        ):
            if isinstance(item, DeadLetter):
                dead.append(item)
            else:
                yield item

    merged = heapq.merge(
        *(bounded_sort(events_of(p), sort_buffer, stats) for p in expanded), key=sort_key
    )
    for event in merged:
        while dead:
            yield _count_dead(dead.popleft(), stats)
        stats.events += 1
        yield event
    while dead:
        yield _count_dead(dead.popleft(), stats)


def _count_dead(item: DeadLetter, stats: ArchiveStats) -> DeadLetter:
    stats.dead_letters += 1
    stats.reasons[item.reason] = stats.reasons.get(item.reason, 0) + 1
    return item


# ---------------------------------------------------------------- pacing


def paced(
    items: Iterable[Item],
    speed: float | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Item]:
    """Replay at ``speed`` x the original pace (None: as fast as possible).

    The first event anchors event time to the clock; each later event waits until
    ``(event_time - first) / speed`` has passed. Late (older) events and dead letters
    go out at once.

    >>> from datetime import timedelta
    >>> from streams.events import PostEvent
    >>> t = datetime(2026, 2, 1, tzinfo=UTC)
    >>> ev = [PostEvent(id=f"post:{s}", event_time=t + timedelta(seconds=s), observed_at=t,
    ...                 post_id=str(s), author="a") for s in (0, 10, 30)]
    >>> now, slept = [0.0], []
    >>> def fake_sleep(s): slept.append(s); now[0] += s
    >>> _ = list(paced(ev, 10.0, clock=lambda: now[0], sleep=fake_sleep))
    >>> slept
    [1.0, 2.0]
    """
    if speed is not None and speed <= 0:
        raise ValueError("speed must be positive (or None for as fast as possible)")
    anchor: tuple[datetime, float] | None = None
    for item in items:
        if speed is not None and not isinstance(item, DeadLetter):
            if anchor is None:
                anchor = (item.event_time, clock())
            else:
                due = anchor[1] + (item.event_time - anchor[0]).total_seconds() / speed
                wait = due - clock()
                if wait > 0:
                    sleep(wait)
        yield item
