"""The suite file's ``segments:`` section: named dimensions, each read from a field of the event, and how an
event's value in each is found and normalised (docs/segments.md).

.. code-block:: yaml

    segments:
      max_values: 50                        # values kept per dimension, pair and window; the rest: (other)
      dimensions:
        tier: metadata.customer_tier        # a metadata entry
        service: metadata.service.name      # OTLP input: the span's resource service.name
        plan: "tag:plan:"                   # the first tag starting with "plan:", without the prefix
        release:                            # two fields combined: "v3|fr-FR"
          fields: [metadata.prompt_version, metadata.locale]
          max_values: 20

A value must be a non-empty string of at most 128 characters: anything else is counted under ``(invalid)``,
an absent field under ``(missing)``; neither takes one of the ``max_values`` places.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from ...models import RequestEvent

__all__ = [
    "DEFAULT_MAX_VALUES",
    "INVALID",
    "MAX_VALUE_CHARS",
    "MISSING",
    "OTHER",
    "RESERVED",
    "Dimension",
    "DimensionConfig",
    "SegmentsConfig",
    "event_slices",
]

#: values kept per dimension, pair and window unless the suite file says otherwise
DEFAULT_MAX_VALUES = 50
#: a value longer than this is counted as (invalid): never a new Redis field per long string
MAX_VALUE_CHARS = 128
#: where the values beyond max_values are counted
OTHER = "(other)"
#: a value that is not a non-empty string of at most MAX_VALUE_CHARS characters
INVALID = "(invalid)"
#: the event has no such field
MISSING = "(missing)"
#: values that take no place among max_values (a producer sending one of them literally is counted as invalid)
RESERVED = frozenset((OTHER, INVALID, MISSING))
#: what joins the values of a dimension of two fields
JOIN = "|"


def _check_field(path: str) -> str:
    if path == "category" or (path.startswith("tag:") and len(path) > 4):
        return path
    if path.startswith("metadata.") and len(path) > 9:
        return path
    raise ValueError(
        f"{path!r} is not a field a slice can be read from: metadata.<key> (e.g. metadata.customer_tier, "
        "metadata.service.name), tag:<prefix> (e.g. tag:tier:) or category"
    )


class DimensionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fields: list[str] = Field(
        min_length=1, max_length=2, description="one field, or two combined (values joined by '|')"
    )
    max_values: int | None = Field(
        default=None, ge=1, le=1000, description="values kept per pair and window; default the section's"
    )

    @field_validator("fields")
    @classmethod
    def _fields(cls, fields: list[str]) -> list[str]:
        return [_check_field(f) for f in fields]


def _one_field(value: Any) -> Any:
    return {"fields": [value]} if isinstance(value, str) else value


#: a dimension given as one field's path, or as {fields, max_values}
DimensionSpec = Annotated[DimensionConfig, BeforeValidator(_one_field)]


class SegmentsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_values: int = Field(
        default=DEFAULT_MAX_VALUES,
        ge=1,
        le=1000,
        description="values kept per dimension, pair and window; the rest are counted under (other)",
    )
    dimensions: dict[str, DimensionSpec] = Field(
        min_length=1, max_length=16, description="dimension name -> its field, or {fields, max_values}"
    )

    @field_validator("dimensions")
    @classmethod
    def _names(cls, dimensions: dict[str, DimensionConfig]) -> dict[str, DimensionConfig]:
        for name in dimensions:
            if not name or len(name) > 64 or not all(c.isalnum() or c in "_.-" for c in name):
                raise ValueError(f"dimension name {name!r}: 1-64 letters, digits, '_', '.' or '-'")
        return dimensions

    def resolved(self) -> tuple[Dimension, ...]:
        """The dimensions in the file's order, each with its fields and cap."""
        return tuple(
            Dimension(name, tuple(spec.fields), spec.max_values or self.max_values)
            for name, spec in self.dimensions.items()
        )


@dataclass(frozen=True)
class Dimension:
    name: str
    fields: tuple[str, ...]
    max_values: int

    def value(self, event: RequestEvent) -> str:
        """The event's value in this dimension, normalised (module docstring)."""
        parts = [_field(event, f) for f in self.fields]
        if any(p is _BAD for p in parts):
            return INVALID
        if any(p is None for p in parts):
            return MISSING
        return JOIN.join(str(p) for p in parts)


_BAD = object()


def _field(event: RequestEvent, path: str) -> object:
    """The field's text; None when absent; _BAD when it is not a usable value."""
    if path == "category":
        found: Any = event.category
    elif path.startswith("tag:"):
        prefix = path[4:]
        found = next((t[len(prefix) :] for t in event.tags if t.startswith(prefix)), None)
    else:
        found = _metadata(event.metadata, path[9:])
    if found is None:
        return None
    if not isinstance(found, str) or not found or len(found) > MAX_VALUE_CHARS or found in RESERVED:
        return _BAD
    return found


def _metadata(metadata: Mapping[str, Any], key: str) -> Any:
    """``key`` as one entry (``service.name``), else followed through nested objects (``user.tier``)."""
    if key in metadata:
        return metadata[key]
    node: Any = metadata
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def event_slices(dimensions: Sequence[Dimension], event: RequestEvent) -> tuple[str, ...]:
    """The event's value in each dimension, in order (streameval.feature ``SLICES``)."""
    return tuple(d.value(event) for d in dimensions)
