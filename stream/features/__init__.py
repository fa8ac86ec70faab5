"""Features the composition root builds only when the suite file asks for them (docs/architecture.md).

Each feature is a package of its own; the engine (decode, route, evaluate, record, close windows,
publish) never imports one.
"""
