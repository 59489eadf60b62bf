"""The live page at ``/`` and the API's own docs (``/docs``, ``/redoc``), all from files shipped
inside the package (``service/api/static``): nothing loads from the internet, so the page and
the docs work on a machine without it.

The page is static HTML and JavaScript polling the REST API; the charting library (uPlot),
Swagger UI and ReDoc are npm builds vendored under ``static/vendor`` with their licences by
``scripts/vendor-web-assets.sh``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).with_name("static")
VENDOR = "/static/vendor"



def install(app: FastAPI) -> None:
    """Serve the page, its static files and local docs on ``app`` (created with
    ``docs_url=None, redoc_url=None``, so FastAPI's CDN-loading pages are not there)."""
    router = APIRouter(include_in_schema=False)
    title = app.title

    @router.get("/")
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @router.get("/docs")
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{title} · API",
            swagger_js_url=f"{VENDOR}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{VENDOR}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
            # no badge from validator.swagger.io when served on a public address
            swagger_ui_parameters={"validatorUrl": None})

    @router.get("/redoc")
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{title} · API",
            redoc_js_url=f"{VENDOR}/redoc/redoc.standalone.js",
            redoc_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png", with_google_fonts=False)

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
