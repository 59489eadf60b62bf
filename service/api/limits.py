"""A request-body size limit on every write (POST, PUT, PATCH, DELETE): 413 with a JSON error.

Pure ASGI, so it holds for any route, and for a chunked body without ``Content-Length`` too:
the body is counted as it arrives and the request is cut off as soon as it passes the limit.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class _TooLarge(HTTPException):
    """Raised while the body is read: the app's exception handler answers the 413 (FastAPI
    passes an HTTPException through its body parsing; anything else would become a 400)."""


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    @property
    def detail(self) -> str:
        return (f"request body too large: the limit is {self.max_bytes} bytes "
                "(MOLTSCOPE_API_MAX_BODY_BYTES)")

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": self.detail}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES:
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send)
                return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(413, self.detail)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(send)
