"""The sessions' Lua scripts. Each touches the keys of one hash tag only (Redis Cluster): a session's
``{ss:name:key}`` keys, or one due-index shard ``{sx:N}`` (streameval.sessions.state has the layout).

Every script reads the Redis clock (``TIME``): one clock for every worker, the same one the window
closer uses as its watermark.
"""

from __future__ import annotations

__all__ = ["APPEND", "CLAIM", "DUE_SET", "FINISH"]

# Append turns to one session. KEYS: 1 turns (list), 2 meta (hash).
# ARGV: 1 gap_s, 2 grace_s, 3 max_turns, 4 max_bytes, 5 the open session's TTL, 6 n, 7 settle_s; then per
#       turn: id, event time, end (1/0), payload.
# Returns {state, deadline or '-1', code per turn}: 0 already appended, 1 appended, 2 late (closed for
# longer than grace_s: not appended), 3 appended to a closed session within grace_s (it reopens: revision).
# The deadline is returned only when the due index must get it (a new or reopened session, a first end
# marker: deadlines only grow otherwise, and an early index entry costs the closer one look).
# A turn's entry is its event time (20 characters, 6 decimals) and 10-digit arrival number, then its
# payload: sorted as strings, the entries are in event-time order, ties in arrival order. Appending is an
# RPUSH (a list entry is far cheaper than a zset member of this size); the order is made when the
# session is read, and in here only when the bounds bite: over max_turns or max_bytes the entry in the
# middle of that order is dropped (never the first or the last).
APPEND = """
local gap, grace = tonumber(ARGV[1]), tonumber(ARGV[2])
local max_turns, max_bytes, ttl, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local settle = tonumber(ARGV[7])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local turns, meta = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'state', 'closed_at', 'first', 'last', 'kept', 'bytes', 'end', 'seq', 'n', 'dropped',
                     'expires')
local state = m[1]
local codes = {}
if state == 'closed' and now > tonumber(m[2]) + grace then
  for i = 1, n do
    codes[i] = redis.call('HEXISTS', meta, 'i:' .. ARGV[7 + 4 * i - 3]) == 1 and 0 or 2
  end
  return {'late', '-1', unpack(codes)}
end
local first, last = tonumber(m[3]), tonumber(m[4])
local kept, bytes = tonumber(m[5]) or 0, tonumber(m[6]) or 0
local ended = m[7] == '1'
local seq, received, dropped = tonumber(m[8]) or 0, tonumber(m[9]) or 0, tonumber(m[10]) or 0
local added = 0
local code = state == 'closed' and 3 or 1
for i = 1, n do
  local a = 7 + 4 * i - 4
  local id, t, payload = ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 4]
  if redis.call('HSETNX', meta, 'i:' .. id, 1) == 0 then
    codes[i] = 0
  else
    seq = seq + 1
    local member = string.format('%020.6f%010d', t, seq) .. payload
    redis.call('RPUSH', turns, member)
    kept, bytes, added = kept + 1, bytes + #member, added + 1
    if not first or t < first then first = t end
    if not last or t > last then last = t end
    if ARGV[a + 3] == '1' then ended = true end
    codes[i] = code
    while (kept > max_turns or bytes > max_bytes) and kept > 2 do
      -- the bounds bite: order the turns (the fixed-width prefix sorts as event time, then arrival)
      local all = redis.call('LRANGE', turns, 0, -1)
      table.sort(all)
      local gone = all[math.floor(kept / 2) + 1]
      redis.call('LREM', turns, 1, gone)
      kept, bytes, dropped = kept - 1, bytes - #gone, dropped + 1
    end
  end
end
if added == 0 then return {state or 'none', '-1', unpack(codes)} end
-- never sooner than settle_s after this turn (an end marker's too): turns of the same moment may still be
-- on their way from other partitions and workers
local deadline = ended and now + settle or math.max(math.min(last, now) + gap, now + settle)
if state == 'closed' then
  state, deadline = 'open', now  -- a late turn within grace: the next revision, at the closer's next tick
elseif not state then
  state = 'open'
end
-- the TTL is renewed when less than half of it is left (not on every turn: two commands fewer)
local renew = not m[11] or tonumber(m[11]) - now < ttl / 2 or m[1] == 'closed'
redis.call('HSET', meta, 'state', state, 'first', first, 'last', last, 'kept', kept, 'bytes', bytes, 'arrival', now,
           'deadline', deadline, 'end', ended and '1' or '0', 'seq', seq, 'n', received + added, 'dropped', dropped,
           'expires', renew and now + ttl or m[11])
if renew then
  redis.call('EXPIRE', turns, ttl)
  redis.call('EXPIRE', meta, ttl)
end
-- the due index needs this deadline only when it is new or earlier than the entry there (a new or reopened
-- session, a first end marker); otherwise deadlines only grow and the closer's claim finds the later one
local moved = not m[1] or m[1] == 'closed' or (ended and m[7] ~= '1')
return {state, moved and string.format('%.6f', deadline) or '-1', unpack(codes)}
"""

# Claim a due session for closing. KEYS: 1 turns, 2 meta, 3 lease. ARGV: 1 worker id, 2 lease ms.
# Returns {'gone'} (expired), {'closed'} (closed already), {'later', deadline} (a turn moved it),
# {'busy'} (another worker holds the lease), or {'ok', now, seq, rev, first, last, arrival, end, n,
# dropped, prev, closed_by of the previous revision, turns...} with the session marked closing.
CLAIM = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local m = redis.call('HMGET', KEYS[2], 'state', 'deadline', 'seq', 'rev', 'first', 'last', 'arrival', 'end', 'n',
                     'dropped', 'prev', 'closed_by')
if not m[1] then return {'gone'} end
if m[1] == 'closed' then return {'closed'} end
if tonumber(m[2]) > now then return {'later', m[2]} end
if not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'busy'} end
redis.call('HSET', KEYS[2], 'state', 'closing')
local out = {'ok', string.format('%.6f', now), m[3], m[4] or '0', m[5], m[6], m[7], m[8], m[9], m[10] or '0',
             m[11] or '', m[12] or ''}
for _, member in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do out[#out + 1] = member end
return out
"""

# After publishing: the session is closed (kept grace_s for late turns), or reopened when turns came in
# while it was being closed. KEYS: 1 turns, 2 meta, 3 lease.
# ARGV: 1 worker id, 2 seq at the claim, 3 next revision, 4 the published result (for the next
#       revision's correction of the aggregates), 5 grace_s, 6 how long the closed session's meta stays
#       (late turns after grace are told apart from new sessions), 7 closed_by.
# Returns {'lost'} (the lease expired and another worker took over), {'closed'}, {'reopened', deadline}.
FINISH = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {'lost'} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
redis.call('HSET', KEYS[2], 'rev', ARGV[3], 'prev', ARGV[4], 'closed_at', string.format('%.6f', now), 'closed_by', ARGV[7])
redis.call('DEL', KEYS[3])
if tonumber(redis.call('HGET', KEYS[2], 'seq')) > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[2], 'state', 'open')
  return {'reopened', redis.call('HGET', KEYS[2], 'deadline')}
end
redis.call('HSET', KEYS[2], 'state', 'closed')
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[5])) + 60)
redis.call('EXPIRE', KEYS[2], math.ceil(tonumber(ARGV[5]) + tonumber(ARGV[6])))
return {'closed'}
"""

# Move or drop a due-index entry only if it still holds the score the closer read: an appender that set
# another deadline meanwhile (a new turn, an end marker) wins. KEYS: 1 the shard's due zset.
# ARGV: 1 member, 2 the score read, 3 the new score, or '' to drop the entry.
DUE_SET = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then return redis.call('ZREM', KEYS[1], ARGV[1]) end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
"""
