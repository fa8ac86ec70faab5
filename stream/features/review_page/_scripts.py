"""The review page's Lua scripts (streameval.features.review_page._store). Every key carries the hash
tag ``{rp}`` of the prefix ``B`` (``P{rp}:``): one slot. Each script touches only the keys it is given
(``KEYS``), as Redis Cluster asks; what a script cannot know in advance (which items to drop, the item an
annotator held before) it answers, and the store calls again with those keys.

Keys, per item ``K`` (a digest of model, suite and event id): ``B doc:K`` (the item document, JSON),
``B m:K`` (hash: model, suite, reasons, rank, need, lease, done, t; ``l:{annotator}`` labelled at,
``k:{annotator}`` skipped at), ``B r:K`` (hash: annotator -> reservation's end, ms), ``B f:K`` (hash:
annotator -> the label sent, JSON); ``B idx`` (zset: K -> selected at, ms) and ``B held`` (hash:
annotator -> the item they hold).
"""

from __future__ import annotations

__all__ = ["ADD", "DROP", "LABELLED", "LIST", "RELEASE", "RESERVE", "SKIP"]

# KEYS: idx, then per item: doc, m. ARGV: now (ms), ttl (s), keep, then per item: K, doc, model, suite,
# reasons, rank, need, lease (ms), summary. An item already kept is left as it is (its labels stay).
# Returns {how many were added, then the items to drop}: those older than the TTL and the oldest beyond
# ``keep``, still in the index (DROP takes them out with their keys; a DROP that never ran is answered
# again by the next ADD).
ADD = """
local idx, now, ttl, keep = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local added = 0
local n = 0
for i = 4, #ARGV, 9 do
  local doc, m = KEYS[2 + 2 * n], KEYS[3 + 2 * n]
  n = n + 1
  if redis.call('EXISTS', m) == 0 then
    redis.call('SET', doc, ARGV[i + 1], 'EX', ttl)
    redis.call('HSET', m, 'model', ARGV[i + 2], 'suite', ARGV[i + 3], 'reasons', ARGV[i + 4],
      'rank', ARGV[i + 5], 'need', ARGV[i + 6], 'lease', ARGV[i + 7], 'summary', ARGV[i + 8],
      'done', 0, 't', now)
    redis.call('EXPIRE', m, ttl)
    redis.call('ZADD', idx, now, ARGV[i])
    added = added + 1
  end
end
redis.call('EXPIRE', idx, ttl)
local out = {added}
local old = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. (now - ttl * 1000))
for _, k in ipairs(old) do out[#out + 1] = k end
local over = redis.call('ZCARD', idx) - #old - keep
if over > 0 then
  for _, k in ipairs(redis.call('ZRANGE', idx, #old, #old + over - 1)) do out[#out + 1] = k end
end
return out
"""

# KEYS: idx, then per item: doc, m, r, f. ARGV: the items K. Drops them with their state.
DROP = """
for i, k in ipairs(ARGV) do
  redis.call('DEL', KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i], KEYS[4 * i + 1])
  redis.call('ZREM', KEYS[1], k)
end
return #ARGV
"""

# Reserve (or renew) item K for an annotator. KEYS: m, r, held, and the reservations (``B r:P``) of the
# item P the caller read the annotator holds, when P is another item. ARGV: P's key or '', K, annotator,
# now (ms). Returns {'ok', lease end} or {why}: gone, labelled, skipped, complete (every reviewer
# labelled), taken (the remaining places are reserved by others), or {'held', P'} when the annotator holds
# another item than the caller read (the store calls again with its keys). An annotator holds one item at
# a time: reserving another releases the previous one.
RESERVE = """
local m, r, held = KEYS[1], KEYS[2], KEYS[3]
local read, k, who, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if redis.call('EXISTS', m) == 0 then return {'gone'} end
if redis.call('HEXISTS', m, 'l:' .. who) == 1 then return {'labelled'} end
if redis.call('HEXISTS', m, 'k:' .. who) == 1 then return {'skipped'} end
local meta = redis.call('HMGET', m, 'need', 'done', 'lease')
local need, done, lease = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3])
local others = 0
local flat = redis.call('HGETALL', r)
for i = 1, #flat, 2 do
  if tonumber(flat[i + 1]) <= now then
    redis.call('HDEL', r, flat[i])
  elseif flat[i] ~= who then
    others = others + 1
  end
end
if done >= need then return {'complete'} end
if done + others >= need then return {'taken'} end
local before = redis.call('HGET', held, who)
if before == false or before == k then before = '' end
if before ~= read then return {'held', before} end
if before ~= '' then redis.call('HDEL', KEYS[4], who) end
redis.call('HSET', held, who, k)
redis.call('EXPIRE', held, 86400)
redis.call('HSET', r, who, now + lease)
redis.call('PEXPIRE', r, math.max(redis.call('PTTL', m), 1))
return {'ok', tostring(now + lease)}
"""

# KEYS: m, r, held. ARGV: K, annotator. The annotator's reservation of K ends.
RELEASE = """
redis.call('HDEL', KEYS[2], ARGV[2])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
"""

# KEYS: m, r, held. ARGV: K, annotator, now (ms). The annotator will not be offered K again.
SKIP = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'k:' .. ARGV[2], ARGV[3])
redis.call('HDEL', KEYS[2], ARGV[2])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
"""

# KEYS: m, r, held, f. ARGV: K, annotator, now (ms), the label (JSON). Once the label is on the broker: the
# annotator labelled K. Returns 1, 0 when it was already marked (a retried submit), -1 when K is gone.
LABELLED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HDEL', KEYS[2], ARGV[2])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[3], ARGV[2]) end
redis.call('HSET', KEYS[4], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[4], math.max(redis.call('PTTL', KEYS[1]), 1))
if redis.call('HEXISTS', KEYS[1], 'l:' .. ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'l:' .. ARGV[2], ARGV[3])
redis.call('HINCRBY', KEYS[1], 'done', 1)
return 1
"""

# KEYS: per item: m, r. ARGV: the items K, newest first. Those still kept as one JSON array of
# [K, meta (flat), reservations (flat)]: one reply to parse, not two per item (the page reads the queue every
# few seconds).
LIST = """
local out = {}
for i, k in ipairs(ARGV) do
  local meta = redis.call('HGETALL', KEYS[2 * i - 1])
  if #meta > 0 then
    out[#out + 1] = {k, meta, redis.call('HGETALL', KEYS[2 * i])}
  end
end
if #out == 0 then return '[]' end
return cjson.encode(out)
"""
