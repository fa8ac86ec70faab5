"""Scripts that may touch only the keys they are given: a test runs the real scripts rewritten so that every
``redis.call`` on a key not in ``KEYS`` fails (Redis Cluster asks every key to be declared; Redis itself
does not check it within one slot)."""

from __future__ import annotations

import re

__all__ = ["declared_only"]

_PRELUDE = """
local __declared = {}
for _, k in ipairs(KEYS) do __declared[k] = true end
local __multi = {DEL = true, EXISTS = true, UNLINK = true, MGET = true, TOUCH = true}
local function __call(command, ...)
  local args = {...}
  local upper = string.upper(command)
  for i = 1, (__multi[upper] and #args or 1) do
    if not __declared[args[i]] then
      error('undeclared key ' .. tostring(args[i]) .. ' in ' .. upper)
    end
  end
  return redis.call(command, ...)
end
"""


def declared_only(script: str) -> str:
    """``script`` failing with "undeclared key ..." whenever it touches a key not in ``KEYS`` (every command
    it calls has its key first; DEL, EXISTS, UNLINK, MGET and TOUCH: every argument is a key)."""
    checked, n = re.subn(r"\bredis\.p?call\(", "__call(", script)
    assert n, "a script without redis.call"
    return _PRELUDE + checked
