"""Framing between the worker and a sandbox process: a 4-byte big-endian length, then UTF-8 JSON.

The same framing is spoken by the Python zygote (``_zygote.py``) and the Node host (``node/host.js``).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

__all__ = ["MAX_FRAME", "encode", "read_frame", "write_frame"]

#: Largest frame either side accepts (a request carries code + event; a reply one result).
MAX_FRAME = 8 << 20


def encode(message: Any) -> bytes:
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> Any:
    """Block until one frame arrives on ``fd``; ``EOFError`` when the pipe is closed."""
    (size,) = struct.unpack(">I", _read_exactly(fd, 4))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    return json.loads(_read_exactly(fd, size))


def write_frame(fd: int, message: Any) -> None:
    data = encode(message)
    while data:
        data = data[os.write(fd, data) :]
