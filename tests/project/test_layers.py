"""One-way layers (docs/architecture.md): no import cycle in the package, each module on its floor.

Every import counts: at the top of a module, under ``if TYPE_CHECKING:`` and inside functions. A module
imports only from its own floor or below. A new module goes on the lowest floor whose imports it needs:
add it to :data:`FLOORS` below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: source folder -> the package it is installed as (pyproject ``package-dir``)
PACKAGES = {"stream": "streameval", "agents": "streameval.agents", "schemas": "streameval.schemas"}

VOCABULARY, CLIENTS, COMPONENTS, CONFIGURATION, ENGINE, ORCHESTRATION, COMPOSITION, AGENTS = range(1, 9)
FLOOR_NAMES = {
    VOCABULARY: "vocabulary",
    CLIENTS: "sinks and clients",
    COMPONENTS: "components",
    CONFIGURATION: "configuration",
    ENGINE: "engine",
    ORCHESTRATION: "orchestration",
    COMPOSITION: "composition",
    AGENTS: "agents and the command line",
}

#: module (without ``streameval.``; a package by its name) -> floor. A trailing ``.*`` covers a package and
#: every module in it, unless a module is listed by itself.
FLOORS: dict[str, int] = {
    # 1. vocabulary: values and types every floor speaks
    "errors": VOCABULARY,
    "models": VOCABULARY,
    "blocks": VOCABULARY,
    "envelope": VOCABULARY,
    "grading": VOCABULARY,
    "stats": VOCABULARY,
    "usage_figures": VOCABULARY,  # a window's usage of the monitored calls from its use:* figures (models)
    "agreement": VOCABULARY,
    "strictjson": VOCABULARY,
    "event_decoder": VOCABULARY,  # raw bytes to a request event, or why not (strictjson, schemas, models)
    "outputs": VOCABULARY,
    "signals": VOCABULARY,
    "secrets": VOCABULARY,
    "_util": VOCABULARY,
    "_version": VOCABULARY,
    "schemas": VOCABULARY,
    "wordpiece": VOCABULARY,
    "embedding": VOCABULARY,  # the sentence encoder (numpy, errors, wordpiece)
    "versioning": VOCABULARY,
    "feature": VOCABULARY,  # the protocols the engine calls a feature by (models, envelope, outputs)
    # embedding drift's numbers, settings and comparison (embedding, pydantic)
    "features.embedding_drift._drift": VOCABULARY,
    # 2. sinks and clients: metrics, logs, Redis keys and scripts, broker and Redis security and connections
    "telemetry": CLIENTS,
    "quality_metrics": CLIENTS,
    "_logs": CLIENTS,
    "keyspace": CLIENTS,
    "_lua": CLIENTS,
    "features.sessions.scripts": CLIENTS,  # the sessions' Lua
    "redis_client": CLIENTS,
    "kafka_security": CLIENTS,
    "redis_security": CLIENTS,
    "connect_check": CLIENTS,
    "kafka_io": CLIENTS,
    "embedded": CLIENTS,
    "versionstore": CLIENTS,
    # 3. components: evaluators, decoders, judges, alerts, the store, dead letters, windows
    "evaluators.*": COMPONENTS,
    "sandbox.*": COMPONENTS,
    "inputs.*": COMPONENTS,
    "judges.*": COMPONENTS,
    "alerts": COMPONENTS,
    "store": COMPONENTS,
    "store_codec": COMPONENTS,
    "store_calls": COMPONENTS,  # the index and dead-letter calls of a batch, the wait for replicas
    "store_entries": COMPONENTS,  # a result as the record calls count it
    "store_published": COMPONENTS,  # the published marks: receipts, pending marks, their format
    "redelivery": COMPONENTS,
    "deadletters": COMPONENTS,
    "windows": COMPONENTS,
    "aggregates": COMPONENTS,  # a closed window's aggregate and the judges' norms, from its hashes
    "features.sessions.*": COMPONENTS,  # key paths, turns, the thread and its metrics, the Redis state
    "windowing": COMPONENTS,
    "registry": COMPONENTS,
    "summary": COMPONENTS,
    "features.review": COMPONENTS,  # the review queue: which results go to people, at what rate
    "features": VOCABULARY,  # the folder of optional features (nothing in it imports anything)
    "features.review_page.*": COMPONENTS,  # the review page's queue in Redis, its documents and export
    "features.redact.*": COMPONENTS,  # redaction before judging: detectors, its config block, the redactor
    "features.*": COMPONENTS,  # the per-event features: their recorders (streameval.feature) and logic
    # 4. configuration: the environment's settings and the suite file
    "settings": CONFIGURATION,
    "config": CONFIGURATION,  # the suite file's loader; its models, routing, versions and issues by job:
    "config_models": CONFIGURATION,
    "config_versions": CONFIGURATION,
    "config_loaded": CONFIGURATION,
    "config_issues": CONFIGURATION,
    "features.setup": CONFIGURATION,  # which features run, from the settings and the suite file
    "migrate": COMPONENTS,  # one-time moves of Redis state an earlier version wrote
    "features.notify._config": CONFIGURATION,  # the suite file's notify: channels (config reads them)
    # 5. engine
    "pipeline": ENGINE,
    "result_build": ENGINE,  # an evaluator's result and the graded result, built fast
    # 6. orchestration: a batch of messages to outcomes, the evaluation processes, the worker's batch loop
    "batch": ORCHESTRATION,
    "evalpool": ORCHESTRATION,
    "processor": ORCHESTRATION,
    "features.sessions.closer": ORCHESTRATION,  # judges a closed session's thread through the pipeline
    "features.sessions.local": ORCHESTRATION,  # the offline twin of the state and the closer
    "inflight": ORCHESTRATION,
    # 7. composition: what builds the clients and wires the parts; programs
    "runtime": COMPOSITION,
    "offline": COMPOSITION,
    "compare_offline": COMPOSITION,
    "backfill": COMPOSITION,
    "api.*": COMPOSITION,
    "features.review_page.web": COMPOSITION,  # the review page's routes and its feedback producer
    "features.drilldown.web": COMPOSITION,  # the features' dashboard reads: their routes (api.WebFeature)
    "features.compare.web": COMPOSITION,
    "features.compare._models": COMPOSITION,  # quality per cost: the route's handler (api._reads)
    "features.usage.web": COMPOSITION,  # the budgets' read
    "features.labels.web": COMPOSITION,
    "features.segments.web": COMPOSITION,
    "features.web": COMPOSITION,  # the dashboard reads every web app serves
    "features.guard._check": ORCHESTRATION,  # one synchronous check through the pipeline, within a deadline
    "features.guard._web": COMPOSITION,  # POST /api/v1/check: its route, the guard's own app
    "features.guard._serve": COMPOSITION,  # streameval guard: the pre-forked server processes
    "features.guard._publish": COMPOSITION,  # publish: true's producer
    "guard_client": VOCABULARY,  # the guard's Python client (httpx only)
    "_cliargs": COMPOSITION,
    "demo": COMPOSITION,
    "up": COMPOSITION,
    "judges.sim": COMPOSITION,  # a program: the scripted judge server
    "features.notify.*": COMPOSITION,  # alert delivery: built by the composition root when the suite file asks for it
    "features.notify._resolves": COMPONENTS,  # the window closer's resolve step (features.setup builds it)
    "": COMPOSITION,  # the package root re-exports the public API from every floor
    # 8. the Faust wiring, and the command line that starts it (``streameval worker``) among the rest
    "agents.*": AGENTS,
    "cli": AGENTS,
    "__main__": AGENTS,
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> dict[str, int]:
    """The package's modules ``name`` imports (anywhere in it), each with the line of its first import."""
    out: dict[str, int] = {}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def known(target: str) -> str | None:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        return target or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from package import module` imports that module; `from module import name` the module
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names
            ]
        for target in targets:
            found = known(target) if target.startswith("streameval") else None
            if found is not None and found != name:
                out.setdefault(found, node.lineno)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def floor_of(module: str) -> int | None:
    short = module.removeprefix("streameval").removeprefix(".")
    if short in FLOORS:
        return FLOORS[short]
    parts = short.split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i]) + ".*"
        if key in FLOORS:
            return FLOORS[key]
    return None


def _where(module: str) -> str:
    return str(MODULES[module].relative_to(ROOT))


def test_the_scan_sees_the_package() -> None:
    assert {"streameval.pipeline", "streameval.inputs._router", "streameval.agents.app"} <= set(MODULES)
    # a function-level import and one under TYPE_CHECKING are both seen (in the pipeline's own module)
    assert "streameval.envelope" in GRAPH["streameval.pipeline"]


def test_every_module_has_a_floor() -> None:
    missing = [f"{_where(m)} ({m})" for m in MODULES if floor_of(m) is None]
    assert missing == [], (
        f"modules without a floor: {missing}. Add each to FLOORS in tests/project/test_layers.py, on the lowest floor "
        "whose imports it needs (docs/architecture.md, 'Layers')"
    )


def test_every_floor_entry_names_a_module() -> None:
    short = {m.removeprefix("streameval").removeprefix(".") for m in MODULES}
    stale = [key for key in FLOORS if key.removesuffix(".*") not in short]
    assert stale == [], f"FLOORS in tests/project/test_layers.py names modules that no longer exist: {stale}"


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components over every import: each must be a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    described = [
        "; ".join(f"{_where(a)}:{GRAPH[a][b]} imports {b}" for a in c for b in GRAPH[a] if b in c)
        for c in cycles
    ]
    assert cycles == [], f"import cycles: {described}"


def test_each_module_imports_only_from_its_floor_or_below() -> None:
    upward = []
    for module, imported in GRAPH.items():
        floor = floor_of(module)
        for target, line in imported.items():
            target_floor = floor_of(target)
            if floor is not None and target_floor is not None and target_floor > floor:
                upward.append(
                    f"{_where(module)}:{line} ({FLOOR_NAMES[floor]}) imports {target} ({FLOOR_NAMES[target_floor]})"
                )
    assert upward == [], "imports from a higher floor:\n" + "\n".join(upward)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ..pipeline import Source\n", {"streameval.pipeline"}),
        ("def f():\n    from .. import telemetry\n", {"streameval.telemetry"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..settings import Settings\n",
            {"streameval.settings"},
        ),
        ("import streameval.store\n", {"streameval.store"}),
        ("from streameval import telemetry\n", {"streameval.telemetry"}),
        ("from streameval import Pipeline\n", {"streameval"}),
    ],
)
def test_the_scan_counts_every_kind_of_import(source: str, expected: set[str], tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert set(_imports("streameval.judges.probe", path)) == expected


def test_each_lua_script_is_the_literal_that_runs() -> None:
    """No script is rebound after its literal (what a reader sees in stream/_lua.py is what Redis runs); the
    record script is composed by ``record_script`` from its core literal and the features' blocks."""
    from streameval import _lua

    tree = ast.parse((ROOT / "stream" / "_lua.py").read_text(encoding="utf-8"))
    assigned = [
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    ]
    scripts = [name for name in _lua.__all__ if name.isupper()]
    assert [name for name in _lua.__all__ if not name.isupper()] == ["record_script"]
    assert sorted(n for n in assigned if n in scripts) == sorted(scripts)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in scripts for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str), ast.unparse(
                node
            )[:60]


#: the engine: what every event goes through, whatever the suite file configures
ENGINE_MODULES = (
    "pipeline",
    "event_decoder",
    "result_build",
    "batch",
    "processor",
    "store",
    "store_codec",
    "store_calls",
    "store_entries",
    "store_published",
    "redelivery",
    "windows",
    "aggregates",
    "usage_figures",
    "alerts",
    "envelope",
    "feature",
    "_lua",
)
#: feature modules: a folder under stream/features/, and the features' modules not moved there yet
FEATURE_MODULES = (
    "features",
    "agreement",
)


def _is_feature(module: str) -> bool:
    short = module.removeprefix("streameval.")
    return any(short == f or short.startswith(f"{f}.") for f in FEATURE_MODULES)


def test_engine_modules_import_no_feature() -> None:
    """The engine knows the protocols of streameval.feature (recorders, annotators, steps), not the features."""
    found = {
        (engine, target.removeprefix("streameval."))
        for engine in ENGINE_MODULES
        for target in GRAPH[f"streameval.{engine}"]
        if _is_feature(target)
    }
    assert found == set(), (
        "engine modules import feature modules: make the feature a plug-in (docs/architecture.md, "
        f"'Features as plug-ins') instead: {sorted(found)}"
    )


def test_the_api_imports_no_feature() -> None:
    """A feature's routes and OpenAPI paths are a web feature (streameval.api.WebFeature) it builds; the
    composition root hands them to the app (docs/architecture.md, "Features as plug-ins")."""
    found = sorted(
        (module, target)
        for module in GRAPH
        if module == "streameval.api" or module.startswith("streameval.api.")
        for target in GRAPH[module]
        if _is_feature(target)
    )
    assert found == [], f"the API imports feature modules: {found}"
