"""Handlers of /api/v1/evaluators (the evaluator-module spec §5): list, presets, create, get, update, delete, test run.

Presets are the built-in registry evaluators (every ``@register``-ed name except the engines
``code`` and ``registered``); their id is their name and they are read-only. Custom evaluators are
``code`` evaluators stored by :class:`~streameval.registry.RegistryStore`; ids are UUIDs.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from .._util import clip
from ..errors import EvaluatorError, InvalidJSON
from ..evaluators import Evaluator, evaluator_class, evaluator_names
from ..evaluators.registered import code_params
from ..models import RequestEvent, format_time
from ..registry import CodeConfig, EvaluatorRecord, NameTaken, RegistryFull, RegistryStore
from ..sandbox import CodeEvaluator
from ..strictjson import loads_strict
from ._bodies import CodeConfigBody, CreateBody, TestBody, UpdateBody, bad_request
from ._errors import BadRequest, Conflict, ExecutionFailed, Forbidden, NotFound

__all__ = ["ENGINES", "SEED_PRESETS", "STORE_KEY", "preset_names", "routes"]

STORE_KEY: web.AppKey[RegistryStore] = web.AppKey("registry_store", RegistryStore)
#: evaluators that run user definitions, not presets of their own
ENGINES = frozenset({"code", "registered"})
#: the evaluator-module spec §3: the five presets, listed first
SEED_PRESETS = ("exact_match", "contains", "regex", "json_schema", "similarity")
_TYPES = ("preset", "code", "llm", "composite")
MAX_BODY = 512 * 1024


def preset_names() -> list[str]:
    rest = [
        n
        for n in evaluator_names()
        if n not in ENGINES and n not in SEED_PRESETS and not n.startswith("test_")
    ]
    return [*SEED_PRESETS, *rest]


def _did_you_mean(name: str) -> str:
    """ "; did you mean 'regex'?" when a preset's name is close to ``name``."""
    close = difflib.get_close_matches(name, preset_names(), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _stamp(cls: type[Evaluator]) -> str:
    """Presets change only with the installed package: the time of their module file."""
    try:
        return format_time(Path(inspect.getfile(cls)).stat().st_mtime)
    except (OSError, TypeError):
        return format_time(0)


def _defaults(cls: type[Evaluator]) -> dict[str, Any]:
    """Params a test run accepts as given: defaults, and each required field's first example."""
    out: dict[str, Any] = {}
    for name, field in cls.Params.model_fields.items():
        if not field.is_required():
            out[field.alias or name] = to_jsonable_python(
                field.get_default(call_default_factory=True), fallback=str
            )
        elif field.examples:
            out[field.alias or name] = field.examples[0]
    return out


def _preset(name: str, *, full: bool) -> dict[str, Any]:
    cls = evaluator_class(name)
    stamp = _stamp(cls)
    view: dict[str, Any] = {
        "id": name,
        "name": name,
        "description": cls.summary or None,
        "type": "preset",
        "isPreset": True,
        "language": None,
        "version": None,
        "createdAt": stamp,
        "updatedAt": stamp,
    }
    if full:
        view["config"] = {
            "presetType": name,
            "params": orjson.loads(orjson.dumps(_defaults(cls), default=str)),
        }
        view["paramsSchema"] = cls.Params.model_json_schema()
    return view


def _custom(record: EvaluatorRecord, *, full: bool) -> dict[str, Any]:
    view = record.model_dump(exclude={"config"})
    view["language"] = record.config.language
    if full:
        view["config"] = record.config.model_dump()
    return view


def _ok(data: Any, status: int = 200) -> web.Response:
    return web.json_response(
        {"code": 200, "data": data}, status=status, dumps=lambda v: orjson.dumps(v).decode()
    )


async def _body(request: web.Request) -> Any:
    """The request's JSON body, strict like events: no duplicate keys, NaN/Infinity, overflowing
    numbers or nesting deeper than events may have."""
    raw = await request.read()  # the app's client_max_size (MAX_BODY) answers 413 beyond it
    try:
        value = orjson.loads(raw)  # UTF-8 only, no lone surrogates
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    try:
        loads_strict(raw)
    except InvalidJSON as exc:
        raise BadRequest(f"the body is {exc.reason}") from None
    return value


async def _code_config(request: web.Request, body: CodeConfigBody) -> CodeConfig:
    """Compile the code of a validated config (never running it); 400 when it is over the size limit
    or does not compile."""
    size, most = len(body.code.encode("utf-8", "surrogatepass")), request.app[STORE_KEY].limits.max_code_bytes
    if size > most:
        message = (
            f"the code is {size} bytes (UTF-8); the limit is {most} (STREAMEVAL_REGISTRY_MAX_CODE_BYTES)"
        )
        raise BadRequest(
            f"invalid request: $.config.code: {message}", [{"path": "$.config.code", "message": message}]
        )
    stored = CodeConfig(**body.model_dump())
    probe = EvaluatorRecord(id="-", name="-", config=stored, version=1, createdAt="-", updatedAt="-")
    try:
        await asyncio.to_thread(code_params, probe)
    except ValidationError as exc:
        errors = [{"path": "$.config.code", "message": e["msg"]} for e in exc.errors(include_url=False)]
        raise BadRequest(f"invalid request: $.config.code: {errors[0]['message']}", errors) from None
    return stored


async def _record(request: web.Request) -> EvaluatorRecord:
    evaluator_id = request.match_info["id"]
    if evaluator_id in preset_names():
        raise Forbidden(f"{evaluator_id!r} is a preset evaluator; presets cannot be changed or deleted")
    record = await request.app[STORE_KEY].get(evaluator_id)
    if record is None:
        raise NotFound(f"evaluator {evaluator_id!r} does not exist")
    return record


async def list_evaluators(request: web.Request) -> web.Response:
    kind = request.query.get("type")
    if kind is not None and kind not in _TYPES:
        raise BadRequest(
            f"type must be one of {', '.join(_TYPES)}; got {kind!r}",
            [{"path": "$.query.type", "message": f"must be one of {', '.join(_TYPES)}"}],
        )
    out: list[dict[str, Any]] = []
    if kind in (None, "preset"):
        out += [_preset(n, full=False) for n in preset_names()]
    if kind in (None, "code"):
        out += [_custom(r, full=False) for r in await request.app[STORE_KEY].list()]
    return _ok(out)


async def list_presets(request: web.Request) -> web.Response:
    return _ok([_preset(n, full=True) for n in preset_names()])


async def get_evaluator(request: web.Request) -> web.Response:
    evaluator_id = request.match_info["id"]
    if evaluator_id in preset_names():
        return _ok(_preset(evaluator_id, full=True))
    record = await request.app[STORE_KEY].get(evaluator_id)
    if record is None:
        raise NotFound(f"evaluator {evaluator_id!r} does not exist{_did_you_mean(evaluator_id)}")
    return _ok(_custom(record, full=True))


async def create_evaluator(request: web.Request) -> web.Response:
    raw = await _body(request)
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind in ("llm", "composite", "preset"):
        why = "presets are built in" if kind == "preset" else "LLM and composite evaluators are not built yet"
        raise BadRequest(
            f"type {kind!r} is not supported yet ({why}); use 'code'",
            [{"path": "$.type", "message": "not supported yet; use 'code'"}],
        )
    try:
        body = CreateBody.model_validate(raw)
    except ValidationError as exc:
        raise bad_request(exc) from None
    if body.name in preset_names() or body.name in ENGINES:
        raise Conflict(f"{body.name!r} is the name of a built-in evaluator")
    config = await _code_config(request, body.config)
    try:
        record = await request.app[STORE_KEY].create(
            name=body.name, description=body.description, config=config
        )
    except (NameTaken, RegistryFull) as exc:
        raise Conflict(str(exc)) from None
    return _ok(_custom(record, full=True), status=201)


async def update_evaluator(request: web.Request) -> web.Response:
    record = await _record(request)
    try:
        body = UpdateBody.model_validate(await _body(request))
    except ValidationError as exc:
        raise bad_request(exc) from None
    changes: dict[str, Any] = {}
    if body.name is not None:
        if body.name in preset_names() or body.name in ENGINES:
            raise Conflict(f"{body.name!r} is the name of a built-in evaluator")
        changes["name"] = body.name
    if "description" in body.model_fields_set:
        changes["description"] = body.description
    if body.config is not None:
        changes["config"] = await _code_config(request, body.config)
    try:
        updated = await request.app[STORE_KEY].update(record, **changes)
    except NameTaken as exc:
        raise Conflict(str(exc)) from None
    return _ok(_custom(updated, full=True))


async def delete_evaluator(request: web.Request) -> web.Response:
    record = await _record(request)
    if not await request.app[STORE_KEY].delete(record):
        raise NotFound(f"evaluator {record.id!r} does not exist")
    return _ok({"id": record.id, "deleted": True})


async def test_evaluator(request: web.Request) -> web.Response:
    evaluator_id = request.match_info["id"]
    try:
        body = TestBody.model_validate(await _body(request))
    except ValidationError as exc:
        raise bad_request(exc) from None
    version: str | None = None
    if evaluator_id in preset_names():
        cls = evaluator_class(evaluator_id)
        try:
            evaluator: Evaluator = cls(cls.Params.model_validate(body.params))
        except ValidationError as exc:
            raise bad_request(exc, prefix=("params",)) from None
    else:
        record = await request.app[STORE_KEY].get(evaluator_id)
        if record is None:
            raise NotFound(f"evaluator {evaluator_id!r} does not exist{_did_you_mean(evaluator_id)}")
        if body.params:
            raise BadRequest(
                "params apply to presets only; a custom evaluator reads metadata",
                [{"path": "$.params", "message": "not allowed for custom evaluators"}],
            )
        evaluator = CodeEvaluator(await asyncio.to_thread(code_params, record))
        version = record.version_tag
    event = RequestEvent(
        id="test-run",
        model="test-run",
        output=body.output,
        input=body.input,
        expected=body.expected,
        metadata=body.metadata,
    )
    started = time.perf_counter()
    try:
        await evaluator.start()
        try:
            score = await evaluator.aevaluate(event)
        finally:
            await evaluator.close()
    except Exception as exc:  # any failure of the evaluator is the evaluator-module spec's "execution failed"
        latency = round((time.perf_counter() - started) * 1000, 3)
        code = exc.code if isinstance(exc, EvaluatorError) else "internal"
        reason = str(exc) if isinstance(exc, EvaluatorError) else f"{type(exc).__name__}: {exc}"
        data = {
            "passed": False,
            "score": None,
            "reason": clip(reason),
            "latencyMs": latency,
            "error": code,
            "details": None,
            "version": version,
        }
        raise ExecutionFailed(f"evaluator execution failed: {clip(reason, 300)}", data) from None
    latency = round((time.perf_counter() - started) * 1000, 3)
    return _ok(
        {
            "passed": score.passed,
            "score": score.score,
            "reason": score.reason,
            "latencyMs": latency,
            "error": None,
            "details": score.details,
            "version": version,
        }
    )


_ID = "/{id:(?!presets$)[^/]+}"


def routes() -> list[web.RouteDef]:
    base = "/api/v1/evaluators"
    return [
        web.get(base, list_evaluators),
        web.post(base, create_evaluator),
        web.get(f"{base}/presets", list_presets),
        # "presets" is a route of its own, never an id (so its Allow header lists only GET)
        web.get(base + _ID, get_evaluator),
        web.put(base + _ID, update_evaluator),
        web.delete(base + _ID, delete_evaluator),
        web.post(base + "/{id}/test", test_evaluator),
    ]
