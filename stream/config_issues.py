"""The suite file's issues beyond one section's shape: checks across sections (agent runs and their inputs,
a suite's judge block against the top-level judges), pydantic's errors put in the file's terms, and the
line of the YAML each issue names."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, get_args

import yaml

from ._util import unknown_name
from .config_models import StreamEvalConfig
from .features.sessions.paths import compile_event_path
from .inputs import FORMATS, OtlpInput
from .judges import PANEL_RESULT_NAME, SuiteJudgeConfig, check_panel_weights, panel_judges

__all__ = [
    "CODE_LINE",
    "TRACE_KEY",
    "input_error",
    "judge_issues",
    "kind_of",
    "line_of",
    "loc_to_path",
    "run_issues",
    "text_line",
]


def loc_to_path(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _node_at(root: yaml.Node | None, loc: Sequence[str | int]) -> tuple[yaml.Node | None, bool]:
    """The YAML node at ``loc``, or its nearest existing parent (then ``False``)."""
    node = root
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            child = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            return node, False
        node = child
    return node, True


def line_of(root: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """1-based line of the YAML node at ``loc`` (or of its nearest existing parent)."""
    node, _ = _node_at(root, loc)
    return node.start_mark.line + 1 if node is not None else None


CODE_LINE = re.compile(r"\(line (\d+)\)")


def text_line(root: yaml.Node | None, loc: Sequence[str | int], message: str) -> int | None:
    """The file line of "(line N)" in ``message`` about the text at ``loc`` (a code evaluator's code):
    line N of a block scalar (``code: |``) is N lines below its indicator; of any other scalar, its first line."""
    found = CODE_LINE.search(message)
    node, exact = _node_at(root, loc)
    if found is None or not exact or not isinstance(node, yaml.ScalarNode):
        return None
    if node.style not in ("|", ">"):  # a quoted or plain scalar: its escapes hide the code's lines
        return node.start_mark.line + 1
    return node.start_mark.line + 1 + int(found.group(1))


#: the key of an ``assemble: spans`` session: a run is one trace (its tool and root spans carry no other key)
TRACE_KEY = ("metadata", "trace_id")


def run_issues(config: StreamEvalConfig) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Agent runs (``assemble: spans``) need an OTLP input, and are keyed by trace id."""
    otlp = any(isinstance(spec, OtlpInput) for spec in config.inputs)
    formats = " or ".join(get_args(OtlpInput.model_fields["format"].annotation))
    for i, session in enumerate(config.sessions):
        if session.assemble != "spans":
            continue
        if not otlp:
            yield (
                ("sessions", i, "assemble"),
                (
                    "spans assembles agent runs from OTLP trace exports; the suite file "
                    f"has no {formats} input"
                ),
            )
        if compile_event_path(session.key).steps != TRACE_KEY:
            yield (
                ("sessions", i, "key"),
                (
                    f"an agent run (assemble: spans) is keyed by its trace: key: metadata.trace_id, "
                    f"not {session.key!r}"
                ),
            )


def input_error(
    loc: Sequence[str | int], kind: str, message: str, ctx: dict[str, Any] | None
) -> tuple[Sequence[str | int], str]:
    """pydantic's error for an ``inputs`` entry, located in the file's terms: without the format tag it
    adds to the path (``inputs.0.json.map``), and a bad format named as such."""
    if len(loc) < 2 or loc[0] != "inputs":
        return loc, message
    if kind == "union_tag_invalid":
        return (
            *loc[:2],
            "format",
        ), f"unknown input format {(ctx or {}).get('tag')!r}; valid formats: {', '.join(FORMATS)}"
    if kind == "union_tag_not_found":
        return (*loc[:2], "format"), f"missing; valid formats: {', '.join(FORMATS)}"
    if len(loc) > 2 and loc[2] in FORMATS:
        return (*loc[:2], *loc[3:]), message
    return loc, message


def kind_of(at: tuple[str | int, ...]) -> str:
    """``suite`` or ``session``: what the config entry at ``at`` is."""
    return "session" if at[0] == "sessions" else "suite"


def judge_issues(
    config: StreamEvalConfig, block: SuiteJudgeConfig, at: tuple[str | int, ...], names: set[str]
) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems of the judge block of the suite (or session) at ``at``: unknown judges, weights, fallback evaluators."""
    base: tuple[str | int, ...] = (*at, "judge")
    out: list[tuple[tuple[str | int, ...], str]] = []
    known = {j.name for j in config.judges}
    if not config.judges:
        out.append(
            (base, f"the {kind_of(at)} has a judge block but the config has no top-level 'judges' list")
        )
        return out
    for k, name in enumerate(block.judges or []):
        if name not in known:
            out.append(((*base, "judges", k), unknown_name("judge", name, known)))
    chosen = [j for j in config.judges if block.judges is None or j.name in block.judges]
    problem = check_panel_weights(chosen)
    if problem is not None:
        out.append(((*base, "judges") if block.judges is not None else ("judges",), problem))
    if len(panel_judges(config.judges, block.judges)) < block.min_judges:
        out.append(
            ((*base, "min_judges"), f"min_judges {block.min_judges} is more than the panel's enabled judges")
        )
    for k, spec in enumerate(block.fallbacks):
        if spec.evaluator not in names:
            out.append(
                (
                    (*base, "fallbacks", k, "evaluator"),
                    f"no evaluator named {spec.evaluator!r} in this suite; names: {', '.join(sorted(names))}",
                )
            )
    if PANEL_RESULT_NAME in names:
        out.append(((*at, "evaluators"), f"{PANEL_RESULT_NAME!r} is reserved for the judge panel's result"))
    return out
