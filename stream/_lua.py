"""Every Lua script streameval runs on Redis, with the keys each one touches (streameval.keyspace).

Each script's KEYS share one hash slot (a test builds every call and checks its slots), so every
script runs on Redis Cluster. No script builds a key name: keys it may need (e.g. the window open
now, for late events) are passed in.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ALERT_CLAIM",
    "CLOSE_READ",
    "DEAD_LETTERS",
    "DEAD_LETTER_RAW",
    "INDEX",
    "MIGRATE_MARKS",
    "PAIR_CAP",
    "PUBLISHED",
    "RECORD_CORE",
    "REGISTRY_DELETE",
    "REGISTRY_PUT",
    "record_script",
]

# Published marks (streameval.store_published), a function of the record script (record_script puts it first) and of PUBLISHED: the results the
# broker acknowledged. ARGV[a + 1]: m pointers hashes, then each one's note count n, then the strings' count;
# then per hash: its n result ids, then n (published field, value) pairs. KEYS after k: the m pointers hashes,
# then the strings. In a hash that still exists, each result id's pointer goes and its published field (a short
# hash of the id) gets the first bytes of the event's digest: a redelivery of the event publishes nothing,
# another event reusing the id tells by the digest. The strings that held the copies go. Returns the index of
# the last KEY and of the last ARGV entry it owns.
_PUBLISHED_FN = """
local function published(a, k)
  local m = tonumber(ARGV[a + 1])
  local nrb = tonumber(ARGV[a + 2 + m])
  local first = a + 3 + m
  for h = 1, m do
    local n = tonumber(ARGV[a + 1 + h])
    if n > 0 and redis.call('EXISTS', KEYS[k + h]) == 1 then
      local last = first + n - 1
      for s = first, last, 4000 do redis.call('HDEL', KEYS[k + h], unpack(ARGV, s, math.min(last, s + 3999))) end
      last = first + 3 * n - 1
      for s = first + n, last, 2000 do
        redis.call('HSET', KEYS[k + h], unpack(ARGV, s, math.min(last, s + 1999)))
      end
    end
    first = first + 3 * n
  end
  if nrb > 0 then redis.call('UNLINK', unpack(KEYS, k + m + 1, k + m + nrb)) end
  return k + m + nrb, first - 1
end
"""

# One pair, no events: the published marks of a pair no batch recorded since (streameval.store_published).
PUBLISHED = """
local function published(a, k)
  local m = tonumber(ARGV[a + 1])
  local nrb = tonumber(ARGV[a + 2 + m])
  local first = a + 3 + m
  for h = 1, m do
    local n = tonumber(ARGV[a + 1 + h])
    if n > 0 and redis.call('EXISTS', KEYS[k + h]) == 1 then
      local last = first + n - 1
      for s = first, last, 4000 do redis.call('HDEL', KEYS[k + h], unpack(ARGV, s, math.min(last, s + 3999))) end
      last = first + 3 * n - 1
      for s = first + n, last, 2000 do
        redis.call('HSET', KEYS[k + h], unpack(ARGV, s, math.min(last, s + 1999)))
      end
    end
    first = first + 3 * n
  end
  if nrb > 0 then redis.call('UNLINK', unpack(KEYS, k + m + 1, k + m + nrb)) end
  return k + m + nrb, first - 1
end
published(0, 0)
return 1
"""

# One model × suite pair, one batch (all KEYS carry the pair's hash tag). A fixed number of Redis calls
# per call, not per event: the marks are read with two HMGET and written with one HSET; each aggregate
# hash is one field holding its figures packed (MessagePack map name -> number; streameval.store
# hash_fields reads it), read with one HGET and written with one HSET; the result pointers with one HSET.
# The encoded results never pass through this script: the worker writes them before it, in the same
# pipeline, as one string per call (streameval.store, ``rb`` keys), and the script keeps, per counted
# event, a pointer to its bytes: Redis hashes every byte of a string that enters Lua, about 1.7 ns a
# byte, which for ~1 KB results was most of the cost of recording.
# The script is composed (:func:`record_script`): this core, then the blocks of the features recording
# with it (streameval.feature: each block's KEYS follow the core's, its ARGV ``nk, na, ...`` follow the
# core's), then the reply. A worker registers one script per combination, once.
# KEYS: 1 all-time hash, 2 result pointers hash (this redelivery generation), 3 the previous one,
#       4 marks hash (this replay generation), 5 marks hash (previous generation); per window size s:
#       2 candidate hashes of the window open now (the worker's guess at the Redis clock, +/- a
#       margin); per target window t: its hash, its closed mark; then the published marks' pointers hashes
#       and strings (PUBLISHED_FN).
# Marks: an event's mark is its 8-byte digest; field = its first ARGV[10] bytes (a bucket), value = the
# other bytes of every mark in the bucket, concatenated (streameval.store.MARK_BUCKET_BYTES).
# ARGV: 1 sizes, 2 targets, 3 events, 4 now ('' = Redis TIME), 5 allowed lateness, 6 window ttl,
#       7 all-time ttl (negative: the worker renewed it lately, set it only on a new hash), 8 marks' ttl
#       ('0': the worker knows the hash has one already), 9 pointers' ttl ('0': keep no results;
#       negative: the worker knows the hash has one already), 10 bucket bytes, 11 all-time increments
#       (MessagePack map); per size: size, candidate start 1, candidate start 2; per target: size index,
#       start, events, increments ('': the same as the all-time increments); per event: mark (digest),
#       result id, pointer (streameval.store: mark, offset, length, string key suffix); then the published
#       marks that ride along (PUBLISHED_FN: m, counts, strings, notes), whose KEYS follow the targets'.
# Returns {'ok'}; {'dup', e, stored pointer or '', ...} and changes nothing when any event is already
# marked (the worker drops those and calls again with the rest: all or nothing, so every event is
# counted once with its mark, also when a batch is partly redelivered); {'skew', now} and changes
# nothing when no candidate is the open window (the worker corrects its clock guess and calls again).
# A target window past the watermark (Redis clock minus lateness), or closed by the window closer,
# counts in the window open now, as late_redirected: never lost, never twice (streameval.windows).
RECORD_CORE = """
local nsizes, ntargets, nevents = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local kt = 5 + 2 * nsizes
local at = 11 + 3 * nsizes
local ae = at + 4 * ntargets
local width = tonumber(ARGV[10])
local step = 8 - width
-- HMGET / HSET of a long list, in slices (unpack takes a few thousand values at most)
local function hmget(key, names)
  local values = {}
  for first = 1, #names, 2000 do
    local got = redis.call('HMGET', key, unpack(names, first, math.min(#names, first + 1999)))
    for i = 1, #got do values[first + i - 1] = got[i] end
  end
  return values
end
local function hset(key, flat)
  for first = 1, #flat, 2000 do redis.call('HSET', key, unpack(flat, first, math.min(#flat, first + 1999))) end
end

-- the marks: which events are already counted (read only), and the buckets to write if none is
local buckets, fields = {}, {}
for e = 1, nevents do
  local field = string.sub(ARGV[ae + 3 * e - 2], 1, width)
  if not buckets[field] then
    buckets[field] = true
    fields[#fields + 1] = field
  end
end
local current, previous = hmget(KEYS[4], fields), hmget(KEYS[5], fields)
local function holds(value, rest)
  if not value then return false end
  local p = string.find(value, rest, 1, true)
  while p and (p - 1) % step ~= 0 do p = string.find(value, rest, p + 1, true) end
  return p ~= nil
end
local dups = {'dup'}
for i, field in ipairs(fields) do buckets[field] = {current[i] or '', previous[i]} end
for e = 1, nevents do
  local mark = ARGV[ae + 3 * e - 2]
  local b, rest = buckets[string.sub(mark, 1, width)], string.sub(mark, width + 1)
  if holds(b[1], rest) or holds(b[2], rest) then
    dups[#dups + 1] = e
    local id = ARGV[ae + 3 * e - 1]  -- the pointer of the counted copy (the worker checks its mark)
    dups[#dups + 1] = redis.call('HGET', KEYS[2], id) or redis.call('HGET', KEYS[3], id) or ''
  else
    b[1] = b[1] .. rest
  end
end
if #dups > 1 then return dups end

-- the target windows: each one's hash, or the open window's when it is past the watermark or closed
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local lateness = tonumber(ARGV[5])
local hashes, late, via = {}, {}, {}
for t = 1, ntargets do
  local a = at + 4 * (t - 1)
  local s, start = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local size = tonumber(ARGV[12 + 3 * (s - 1)])
  local k = kt + 2 * (t - 1)
  hashes[t] = KEYS[k + 1]
  if start + size + lateness <= now or redis.call('EXISTS', KEYS[k + 2]) == 1 then
    local open = math.floor(now / size) * size
    hashes[t] = nil
    for c = 1, 2 do
      if tonumber(ARGV[12 + 3 * (s - 1) + c]) == open then hashes[t], via[t] = KEYS[5 + 2 * (s - 1) + c], c end
    end
    if not hashes[t] then return {'skew', string.format('%.6f', now)} end
    late[t] = 'late_redirected'
  elseif start + size <= now then
    late[t] = 'late'
  end
end

-- writes: the marks, then the aggregates
local flat = {}
for _, field in ipairs(fields) do
  flat[#flat + 1], flat[#flat + 2] = field, buckets[field][1]
end
-- A hash of a few hundred short fields is a listpack (hash-max-listpack-entries), searched linearly on
-- every HMGET and HSET; one value longer than hash-max-listpack-value (64 by default) makes it a hash
-- table at once. Field '' is never a bucket (exactly ARGV[10] bytes) nor a result id (never empty).
local function as_table(key) redis.call('HSETNX', key, '', string.rep('-', 256)) end
if ARGV[8] ~= '0' then as_table(KEYS[4]) end
hset(KEYS[4], flat)
if ARGV[8] ~= '0' then redis.call('EXPIRE', KEYS[4], ARGV[8]) end
-- the results the broker acknowledged since (streameval.store_published), before this call's pointers: a
-- reused id's newer pointer wins
local kb, ab = published(ae + 3 * nevents, kt + 2 * ntargets)
local pttl = tonumber(ARGV[9])
if pttl ~= 0 then
  if pttl > 0 then as_table(KEYS[2]) end
  local pointers = {}
  for e = 1, nevents do pointers[2 * e - 1], pointers[2 * e] = ARGV[ae + 3 * e - 1], ARGV[ae + 3 * e] end
  hset(KEYS[2], pointers)
  if pttl > 0 then redis.call('EXPIRE', KEYS[2], pttl) end
end
-- add increments (MessagePack map name -> number; '' = the all-time ones, unpacked once) to an aggregate
-- hash's packed figures (exact: counts stay integers in doubles); a new hash gets its TTL, an existing
-- one only when renew
local total = cmsgpack.unpack(ARGV[11])
local function add(hash, increments, ttl, renew, extra, n)
  local inc = increments == '' and total or cmsgpack.unpack(increments)
  local packed = redis.call('HGET', hash, '~')
  local figures = packed and cmsgpack.unpack(packed) or {}
  for name, value in pairs(inc) do figures[name] = (figures[name] or 0) + value end
  if extra then figures[extra] = (figures[extra] or 0) + tonumber(n) end
  redis.call('HSET', hash, '~', cmsgpack.pack(figures))
  if renew or not packed then redis.call('EXPIRE', hash, ttl) end
end
for t = 1, ntargets do
  local a = at + 4 * (t - 1)
  add(hashes[t], ARGV[a + 4], ARGV[6], false, late[t], ARGV[a + 3])
end
local ttl = tonumber(ARGV[7])
add(KEYS[1], ARGV[11], math.abs(ttl), ttl > 0)
-- feature blocks (streameval.feature): each owns the KEYS after kb and the ARGV after ab, nk and na of them
"""

_BLOCK = """-- block: {name}
do
  local nk, na = tonumber(ARGV[ab + 1]), tonumber(ARGV[ab + 2])
  if na > 0 then
    local k0, a0 = kb, ab + 2
{body}
  end
  kb, ab = kb + nk, ab + 2 + na
end
"""


def record_script(blocks: Sequence[tuple[str, str]] = ()) -> str:
    """The record script: the published marks' function (as in :data:`PUBLISHED`), :data:`RECORD_CORE`, then each ``(name, Lua fragment)`` block in order
    (streameval.feature), then the reply."""
    out = [_PUBLISHED_FN, RECORD_CORE]
    for name, lua in blocks:
        body = "\n".join(f"    {line}" if line else "" for line in lua.strip("\n").splitlines())
        out.append(_BLOCK.format(name=name, body=body))
    out.append("return {'ok'}\n")
    return "".join(out)


# One pair and replay generation, once (``streameval migrate marks``, streameval.migrate). KEYS: 1 the marks
# hash (digest buckets), then the hashes of the layout before the buckets, ``mk:{gen}:{shard}`` (field: an
# 8-byte digest). ARGV: 1 bucket bytes, 2 the marks hash's TTL when it has none. Each old mark joins its
# bucket (unless there already); the old hashes are deleted. Returns how many marks moved.
MIGRATE_MARKS = """
local width, moved = tonumber(ARGV[1]), 0
local step = 8 - width
local function holds(value, rest)
  local p = string.find(value, rest, 1, true)
  while p and (p - 1) % step ~= 0 do p = string.find(value, rest, p + 1, true) end
  return p ~= nil
end
for k = 2, #KEYS do
  for _, digest in ipairs(redis.call('HKEYS', KEYS[k])) do
    if #digest == 8 then
      local field, rest = string.sub(digest, 1, width), string.sub(digest, width + 1)
      local value = redis.call('HGET', KEYS[1], field) or ''
      if not holds(value, rest) then
        redis.call('HSET', KEYS[1], field, value .. rest)
        moved = moved + 1
      end
    end
  end
  redis.call('DEL', KEYS[k])
end
if moved > 0 and redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return moved
"""

# The index slot, one batch. KEYS: per window w: its pairs set; per size: the unpublished windows
# (zset) and every window with data (zset, for the dashboard); last the pairs zset (score: last seen).
# ARGV: 1 windows, 2 sizes, 3 window ttl, 4 oldest start kept, 5 now, 6 all-time ttl; per window:
# size index, start, pair count, pairs...
INDEX = """
local nw, ns, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local pairs, seen, a = KEYS[nw + 2 * ns + 1], {}, 7
for w = 1, nw do
  local s, start, n = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  for i = 1, n do
    local pair = ARGV[a + 2 + i]
    redis.call('SADD', KEYS[w], pair)
    if not seen[pair] then
      seen[pair] = true
      redis.call('ZADD', pairs, ARGV[5], pair)
    end
  end
  redis.call('EXPIRE', KEYS[w], ttl)
  redis.call('ZADD', KEYS[nw + 2 * s - 1], start, start)
  redis.call('ZADD', KEYS[nw + 2 * s], start, start)
  a = a + 3 + n
end
for s = 1, ns do
  for k = nw + 2 * s - 1, nw + 2 * s do
    redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', '(' .. ARGV[4])
    redis.call('EXPIRE', KEYS[k], ttl)
  end
end
redis.call('EXPIRE', pairs, ARGV[6])
return 1
"""

# The index slot. KEYS 1 pairs zset (member pair, score last seen). ARGV 1 cap, 2 now, 3 forget pairs
# last seen before this, 4 ttl, then pairs. Returns per pair 1 (admitted) or 0 (over the cap).
PAIR_CAP = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local cap, out = tonumber(ARGV[1]), {}
for i = 5, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) or redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], ARGV[2], ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return out
"""

# The dead-letter slot, one batch. KEYS: 1 all-time counts by kind; then the window hashes; then the
# seen hashes (offsets already counted, per generation × topic × partition); then per size the zset
# of windows with dead letters. ARGV: 1 window keys, 2 seen keys, 3 sizes, 4 window ttl, 5 seen
# ttl, 6 oldest start kept, 7 all-time ttl; per dead letter: kind, seen key index (this
# generation), seen key index (previous one), offset, then per size: window key index, start.
# Returns how many were new.
DEAD_LETTERS = """
local nw, nseen, ns = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local counted, a = 0, 8
while a <= #ARGV do
  local kind, offset = ARGV[a], ARGV[a + 3]
  local seen, previous = KEYS[1 + nw + tonumber(ARGV[a + 1])], KEYS[1 + nw + tonumber(ARGV[a + 2])]
  if redis.call('HEXISTS', previous, offset) == 0 and redis.call('HSETNX', seen, offset, 1) == 1 then
    counted = counted + 1
    redis.call('HINCRBY', KEYS[1], kind, 1)
    for s = 1, ns do
      local w, start = KEYS[1 + tonumber(ARGV[a + 2 + 2 * s])], ARGV[a + 3 + 2 * s]
      redis.call('HINCRBY', w, kind, 1)
      redis.call('EXPIRE', w, ARGV[4])
      redis.call('ZADD', KEYS[1 + nw + nseen + s], start, start)
    end
  end
  a = a + 4 + 2 * ns
end
for i = 1, nseen do redis.call('EXPIRE', KEYS[1 + nw + i], ARGV[5]) end
for s = 1, ns do
  local z = KEYS[1 + nw + nseen + s]
  redis.call('ZREMRANGEBYSCORE', z, '-inf', '(' .. ARGV[6])
  redis.call('EXPIRE', z, ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[7])
return counted
"""

# One pair's window, at closing (pair slot). KEYS 1 closed mark, 2 window hash, 3 all-time hash.
# ARGV 1 worker id, 2 ttl. Sets the mark first: nothing can be added to the window after this read.
CLOSE_READ = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return {redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
"""

# KEYS[1] the alert's claim, KEYS[2] the rule × pair cooldown (value: when it last fired, closer clock);
# both in the pair's slot. ARGV: 1 worker id, 2 ttl, 3 now, 4 cooldown s. Returns 1 publish, 0 already
# claimed, -1 in cooldown.
# An alert's claim: at least once, never zero (docs/reliability.md, what each topic promises).
# KEYS 1 the alert's claim (rule x window x pair), 2 the rule x pair cooldown; ARGV 1 worker id, 2 TTL s,
# 3 now, 4 cooldown s. Returns 0 when the alert is 'sent' (the closer marks it so once the broker
# acknowledged it): not again. Otherwise 1, send it: the claim then holds the id of the worker trying, which
# never stops a later try (that worker may die before its send is acknowledged: a repeat with the same id,
# never a loss). Only an alert's first try is held to the cooldown, and takes it (-1: suppressed by the
# cooldown); a retry finds its claim and passes.
ALERT_CLAIM = """
local held = redis.call('GET', KEYS[1])
if held == 'sent' then return 0 end
if not held and tonumber(ARGV[4]) > 0 then
  local last = redis.call('GET', KEYS[2])
  if last and tonumber(ARGV[3]) - tonumber(last) < tonumber(ARGV[4]) then return -1 end
  redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[2])
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""

# The registry slot. KEYS 1 record key, 2 names hash, 3 rev counter; ARGV 1 id, 2 name, 3 record JSON,
# 4 old name ('' when new), 5 channel, 6 most evaluators. Returns 0 when the name belongs to another id,
# -1 when a new record would exceed the count limit, else 1.
REGISTRY_PUT = """
local owner = redis.call('HGET', KEYS[2], ARGV[2])
if owner and owner ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[6]) then return -1 end
if ARGV[4] ~= '' and ARGV[4] ~= ARGV[2] then redis.call('HDEL', KEYS[2], ARGV[4]) end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[3])
redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[5], ARGV[1])
return 1
"""

# The registry slot. KEYS 1 record key, 2 names hash, 3 rev; ARGV 1 id, 2 name, 3 channel
REGISTRY_DELETE = """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[2], ARGV[2]) end
redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
"""

# The raw-dead-letter slot (streameval.deadletters). Keep one event under its content key with a TTL,
# within a total budget. KEYS: index (zset of
# "sha:size" by expiry), used bytes counter, the event's key. ARGV: now (s), ttl (s), budget, size,
# bytes, sha. Expired entries are forgotten first, so the counter follows what Redis still holds.
DEAD_LETTER_RAW = """
local now, ttl, budget, size = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #old > 0 then
  local freed = 0
  for _, member in ipairs(old) do freed = freed + tonumber(string.match(member, ':(%d+)$')) end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('DECRBY', KEYS[2], freed)
end
local member = ARGV[6] .. ':' .. ARGV[4]
if redis.call('EXISTS', KEYS[3]) == 0 then
  local used = tonumber(redis.call('GET', KEYS[2]) or '0')
  if used + size > budget then return 0 end
  redis.call('INCRBY', KEYS[2], size)
end
redis.call('SET', KEYS[3], ARGV[5], 'EX', ttl)
redis.call('ZADD', KEYS[1], now + ttl, member)
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
return 1
"""

# The suite-versions slot (streameval.versionstore), once per worker or backfill start. KEYS: 1 labels
# hash, 2 current hash, 3 definitions hash, 4 runs hash. ARGV: 1 run kind (live, shadow, backfill), 2 n,
# then per version: suite, version, label field ("" without a label), definition field, definition.
# All or nothing: when a label already names another version, writes nothing and returns the clashes
# as a flat list {suite, label, the other version}; else an empty list.
VERSIONS_REGISTER = """
local n, clashes = tonumber(ARGV[2]), {}
for i = 0, n - 1 do
  local a = 3 + 5 * i
  local field = ARGV[a + 2]
  if field ~= '' then
    local known = redis.call('HGET', KEYS[1], field)
    if known and known ~= ARGV[a + 1] then
      local label = string.sub(field, string.find(field, ':', 1, true) + 1)
      table.insert(clashes, ARGV[a]); table.insert(clashes, label); table.insert(clashes, known)
    end
  end
end
if #clashes > 0 then return clashes end
for i = 0, n - 1 do
  local a = 3 + 5 * i
  if ARGV[a + 2] ~= '' then redis.call('HSET', KEYS[1], ARGV[a + 2], ARGV[a + 1]) end
  if ARGV[1] == 'live' then redis.call('HSET', KEYS[2], ARGV[a], ARGV[a + 1]) end
  redis.call('HSET', KEYS[3], ARGV[a + 3], ARGV[a + 4])
  redis.call('HSET', KEYS[4], ARGV[a + 3], ARGV[1])
end
return clashes
"""

# -- the review queue (streameval.features.review) ------------------------------------------------------------

# One pair. KEYS 1 the pair's counter of this minute. ARGV 1 most per minute, 2 wanted, 3 ttl. Returns how
# many of the wanted may be published (the counter keeps only what was granted).
REVIEW_TAKE = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.max(0, math.min(tonumber(ARGV[2]), tonumber(ARGV[1]) - used))
if grant > 0 then
  redis.call('INCRBY', KEYS[1], grant)
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return grant
"""
