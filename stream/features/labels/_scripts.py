"""The label join's Lua scripts (streameval.features.labels), each on one hash slot: the verdict buckets' shard,
a pair, or the waiting labels' tag (streameval.keyspace names every key)."""

from __future__ import annotations

__all__ = [
    "LABEL_JOIN_READ",
    "LABEL_KEEP",
    "LABEL_PENDING_ADD",
    "LABEL_PENDING_SETTLE",
    "LABEL_PENDING_TAKE",
    "LABEL_ROWS",
]

# One shard. KEYS: per label, its bucket key of this generation and of the previous one. ARGV: per label,
# its field. Returns per label the verdict record, or '' when neither generation holds it.
LABEL_JOIN_READ = """
local out = {}
for i = 1, #ARGV do
  local v = redis.call('HGET', KEYS[2 * i - 1], ARGV[i])
  if not v then v = redis.call('HGET', KEYS[2 * i], ARGV[i]) end
  out[i] = v or ''
end
return out
"""

# One shard, in the record pipeline. KEYS: bucket keys. ARGV: 1 ttl, then (key index, field, verdict) per
# event. A bucket without a TTL gets one (whatever a worker remembers or a failed call left behind).
LABEL_KEEP = """
for i = 2, #ARGV, 3 do redis.call('HSET', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2]) end
for k = 1, #KEYS do
  if redis.call('TTL', KEYS[k]) < 0 then redis.call('EXPIRE', KEYS[k], ARGV[1]) end
end
return 1
"""

# One pair. KEYS: the all-time rows, then each window's rows. ARGV: 1 most bytes per key, 2 all-time ttl,
# 3 window ttl, 4 the rows. Returns how many keys were full (their rows are not appended).
LABEL_ROWS = """
local full = 0
for i = 1, #KEYS do
  if redis.call('STRLEN', KEYS[i]) + #ARGV[4] <= tonumber(ARGV[1]) then
    redis.call('APPEND', KEYS[i], ARGV[4])
    redis.call('EXPIRE', KEYS[i], i == 1 and ARGV[2] or ARGV[3])
  else
    full = full + 1
  end
end
return full
"""

# The waiting labels. KEYS 1 zset (member: event digest + annotator digest, score: next try), 2 hash (member
# -> data). ARGV 1 most members, 2 ttl, then (member, next try, data) per label. The same member again
# replaces its data (the same annotator: the last label wins). Returns the members refused (list full).
LABEL_PENDING_ADD = """
local refused, most = {}, tonumber(ARGV[1])
for i = 3, #ARGV, 3 do
  local m = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], m) or redis.call('ZCARD', KEYS[1]) < most then
    redis.call('ZADD', KEYS[1], ARGV[i + 1], m)
    redis.call('HSET', KEYS[2], m, ARGV[i + 2])
  else
    refused[#refused + 1] = m
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return refused
"""

# Take due waiting labels with a lease: their next try moves to ARGV 2, so another worker takes them only
# if this one dies. ARGV 1 now, 2 lease end, 3 most to take. Returns member, data, ...
LABEL_PENDING_TAKE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, m in ipairs(due) do
  redis.call('ZADD', KEYS[1], ARGV[2], m)
  out[#out + 1] = m
  out[#out + 1] = redis.call('HGET', KEYS[2], m) or ''
end
return out
"""

# Settle taken labels. ARGV: (member, data as taken, next try or '' when done) per label. A member whose
# data changed since (a newer label of the same annotator came) is left to its new data.
LABEL_PENDING_SETTLE = """
for i = 1, #ARGV, 3 do
  local m = ARGV[i]
  if (redis.call('HGET', KEYS[2], m) or '') == ARGV[i + 1] then
    if ARGV[i + 2] == '' then
      redis.call('ZREM', KEYS[1], m)
      redis.call('HDEL', KEYS[2], m)
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 2], m)
    end
  end
end
return 1
"""
