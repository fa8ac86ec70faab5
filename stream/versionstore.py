"""Suite versions in Redis: labels, the current version of each suite, the definitions (docs/versions.md).

Keys (one hash tag ``{versions}``, streameval.keyspace):

* ``P{versions}:labels``   ``quote(suite):label`` -> version. A label names one version for ever: a worker
  whose suite reuses a label with a different definition refuses to start, naming both versions.
* ``P{versions}:current``  suite -> the version live workers run; the API's default version.
* ``P{versions}:defs``     ``quote(suite):version`` -> the resolved definition (canonical JSON), so that a
  version hash found in a result can always be read back.
* ``P{versions}:runs``     ``quote(suite):version`` -> ``live``, ``shadow`` or ``backfill``: how it last ran.

Written once per worker start (and backfill start), never per event. Sizes: one field per suite and
version; definitions are the size of the suite file's part for that suite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from . import _lua
from .errors import ConfigError
from .keyspace import Client, Keys, guard, run_scripts
from .versioning import canonical_json

__all__ = ["RunKind", "VersionInfo", "register_versions"]

RunKind = Literal["live", "shadow", "backfill"]


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One suite version a process runs: the suite, its version and label, its resolved definition."""

    suite: str
    version: str
    label: str | None
    definition: dict[str, Any]


def _field(suite: str, tail: str) -> str:
    return f"{quote(suite, safe='')}:{tail}"


async def register_versions(
    client: Client, keys: Keys, versions: Sequence[VersionInfo], *, run: RunKind, file: str = "<config>"
) -> None:
    """Record ``versions`` (labels, definitions, how they run; ``live`` ones also become current).

    Raises :class:`ConfigError` when a label already names another version of the same suite: every
    clash is listed with both hashes, and nothing of this call is written (one script, all or nothing).
    """
    if not versions:
        return
    args: list[Any] = [run, len(versions)]
    for info in versions:
        args += [
            info.suite,
            info.version,
            _field(info.suite, info.label) if info.label else "",
            _field(info.suite, info.version),
            canonical_json(info.definition),
        ]
    script = client.register_script(_lua.VERSIONS_REGISTER)
    kl = [keys.version_labels, keys.current_versions, keys.version_definitions, keys.version_runs]
    [clashes] = await guard(run_scripts(client, [(script, kl, args)]))
    if clashes:
        problems = []
        for i in range(0, len(clashes), 3):
            suite, label, other = (c.decode() if isinstance(c, bytes) else str(c) for c in clashes[i : i + 3])
            mine = next(v.version for v in versions if v.suite == suite and v.label == label)
            problems.append(
                f"suite {suite!r}: label {label!r} already names version {other}; this definition is "
                f"version {mine}. Give the changed suite a new label (or none)"
            )
        raise ConfigError(f"{file}: " + "; ".join(problems))
