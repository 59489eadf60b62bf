"""The Moltbook write client: ``POST /posts``, ``POST /posts/{id}/comments``, ``POST /verify``.

Every write is logged (method, path, status, created id; never the key) to the ``moltscope.
probes`` logger and handed to ``on_write`` (the runner stores it in Redis). When a create
answer carries ``verification_required`` with a ``verification`` challenge, the challenge is
solved (:mod:`service.probes.verify`) and answered at once: the platform gives seconds.
A 429 raises :class:`RateLimited` with the wait the platform asked for; the runner then
defers, it never retries in a loop.

The key lives in a ``SecretStr``; ``repr`` shows ``**********``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from service.probes.verify import solve_challenge

log = logging.getLogger("moltscope.probes")


class WriteError(Exception):
    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class RateLimited(WriteError):
    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message, 429)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Written:
    id: str
    verified: bool | None  # None: the platform asked for no verification


def _retry_after(resp: httpx.Response) -> float:
    try:
        return float(resp.headers["Retry-After"])
    except (KeyError, ValueError):
        pass
    try:
        body = resp.json()
        return float(body.get("retry_after_seconds") or body.get("retry_after") or 60.0)
    except (ValueError, AttributeError, TypeError):
        return 60.0


def _challenge(data: dict[str, Any]) -> tuple[str, str] | None:
    """(code, challenge text) when the answer asks for a verification, wherever it nests."""
    for scope in (data, data.get("post"), data.get("comment")):
        if not isinstance(scope, dict):
            continue
        v = scope.get("verification")
        if isinstance(v, dict) and (scope.get("verification_required") or v.get("challenge")
                                    or v.get("challenge_text")):
            code = v.get("code") or v.get("verification_code")
            text = v.get("challenge") or v.get("challenge_text")
            if code and text:
                return str(code), str(text)
    return None


def _created_id(data: dict[str, Any], kind: str) -> str:
    obj = data.get(kind)
    found = obj.get("id") if isinstance(obj, dict) else data.get("id")
    if not found:
        raise WriteError(f"create answer names no {kind} id")
    return str(found)


class MoltbookWriter:
    def __init__(self, base_url: str, api_key: SecretStr, *, timeout_s: float = 30.0,
                 client: httpx.Client | None = None,
                 on_write: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.base_url = base_url
        self._key = api_key
        self._client = client or httpx.Client(base_url=base_url, timeout=timeout_s,
                                              follow_redirects=False,
                                              headers={"User-Agent": "moltscope-probes"})
        self._on_write = on_write

    def __repr__(self) -> str:
        return f"MoltbookWriter(base_url={self.base_url!r}, api_key={self._key!r})"

    def close(self) -> None:
        self._client.close()

    def create_post(self, submolt: str, title: str, content: str) -> Written:
        data, path = self._post("/posts", {"submolt": submolt, "title": title,
                                           "content": content})
        return Written(_created_id(data, "post"), self._verify(data, path))

    def comment(self, post_id: str, content: str, parent_id: str | None = None) -> Written:
        body: dict[str, Any] = {"content": content}
        if parent_id:
            body["parent_id"] = parent_id
        data, path = self._post(f"/posts/{post_id}/comments", body)
        return Written(_created_id(data, "comment"), self._verify(data, path))

    def _verify(self, data: dict[str, Any], path: str) -> bool | None:
        found = _challenge(data)
        if found is None:
            return None
        code, text = found
        try:
            answer = solve_challenge(text)
        except ValueError:
            log.warning("verification for %s: challenge not understood", path)
            return False
        try:
            result, _ = self._post("/verify", {"verification_code": code, "answer": answer})
        except WriteError as exc:
            log.warning("verification for %s refused: %s", path, exc)
            return False
        return bool(result.get("success", True))

    def _post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        headers = {"Authorization": f"Bearer {self._key.get_secret_value()}"}
        started = time.time()
        try:
            resp = self._client.post(path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            self._record(path, "error", started, None)
            raise WriteError(f"{path}: {type(exc).__name__}") from None
        try:
            data = resp.json()
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        created = (data.get("post") or data.get("comment") or {}) if path != "/verify" else {}
        self._record(path, resp.status_code, started,
                     created.get("id") if isinstance(created, dict) else None)
        if resp.status_code == 429:
            raise RateLimited(f"{path}: rate limited", _retry_after(resp))
        if resp.status_code >= 400 or data.get("success") is False:
            raise WriteError(f"{path}: {resp.status_code} {data.get('error', '')}".strip(),
                             resp.status_code)
        return data, path

    def _record(self, path: str, status: int | str, at: float, created: str | None) -> None:
        log.info("probe write POST %s -> %s%s", path, status, f" id={created}" if created else "")
        if self._on_write is not None:
            self._on_write({"at": at, "method": "POST", "path": path, "status": status,
                            "id": created})
