"""The web pages (docs/api.md "Pages"): plain HTML, JavaScript and CSS shipped as package data, no build
step and no third-party script. ``/evaluators`` (the evaluator-module spec §6 list), ``/evaluators/{id}``
(editor; ``new`` creates), ``/dashboard`` (live figures); ``/static/*`` serves the assets, and
``/favicon.ico`` the icon (an SVG) for clients that ask for it there."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

__all__ = ["WEB_DIR", "routes"]

WEB_DIR = Path(__file__).resolve().parent / "web"


def _page(name: str) -> Handler:
    async def handler(request: web.Request) -> web.FileResponse:
        return web.FileResponse(WEB_DIR / name, headers={"Cache-Control": "no-cache"})

    return handler


async def _favicon(request: web.Request) -> web.FileResponse:
    return web.FileResponse(
        WEB_DIR / "favicon.svg", headers={"Content-Type": "image/svg+xml", "Cache-Control": "max-age=86400"}
    )


async def _home(request: web.Request) -> web.Response:
    raise web.HTTPFound("/evaluators")


def routes() -> list[web.AbstractRouteDef]:
    return [
        web.get("/", _home),
        web.get("/evaluators", _page("evaluators.html")),
        web.get("/evaluators/{id}", _page("editor.html")),
        web.get("/dashboard", _page("dashboard.html")),
        web.get("/favicon.ico", _favicon),
        web.static("/static", WEB_DIR, append_version=False),
    ]
