"""The sessions' Lua scripts. Each touches the keys of one hash tag only (Redis Cluster): one shard
``{sx:N}`` of the sessions, whose keys are the due index of that shard and the state of every session
that falls in it (streameval.features.sessions.state has the layout).

Every script reads the Redis clock (``TIME``): one clock for every worker, the same one the window
closer uses as its watermark.
"""

from __future__ import annotations

__all__ = ["APPEND", "CLAIM", "DUE_SET", "FINISH", "RENEW"]

# A session's meta hash keeps its figures packed in one field, ``v``: two hash commands a batch instead of
# a dozen fields to read and write. ``v`` is 64 bytes (a listpack keeps values up to 64 bytes: the hash
# stays compact): first, last, expires, deadline, arrival (doubles), kept, bytes, end (1/0), seq, n,
# dropped (unsigned 32-bit integers), little-endian (streameval.features.sessions.state.META_FORMAT). ``state`` stays a field
# of its own (written when it changes), as do rev, prev, closed_at, closed_by (FINISH), and in a marked
# session (APPEND) ``mk`` and ``i:{turn id}`` per turn.
_UNPACK = """
local function unpack_v(v)
  if not v then return nil end
  return {struct.unpack('<dddddIIIIII', v)}
end
local function due_score(deadline)  -- whole milliseconds (the claim reads the exact deadline in the meta)
  return string.format('%d', math.floor(deadline * 1000))
end
"""

# Append the turns of one batch to the sessions of one shard, and set their due-index entries, in one call.
# KEYS: 1 the shard's due zset; then per session: turns (list), meta (hash).
# ARGV: 1 the number T of term sets; then per term set: gap_s, grace_s, max_turns, max_bytes, the open
#       session's TTL (whole seconds), settle_s; then every session's header and turn ids in one string:
#       per session, in the order of KEYS, ``struct`` ``<ddHI4BI4`` (the least and the greatest event time of its turns,
#       its term set 1..T, n its turns, flags: 1 one of them carries the end marker, 2 an id comes twice,
#       4 one of them must be looked up (below), 8 their marks follow, 16 a session that keeps its marks
#       from the start (an agent run: its steps are never vouched for); the bytes its entries count toward
#       max_bytes: their lengths + 10 each), then one character per turn ('1': it carries the end marker,
#       else '0'), then with flag 8 per turn ``<I4c0``: its mark, ``i:`` + its id as the turn's JSON
#       writes it (between the quotes); then each turn's entry (below), one argument each, in the same
#       order. Not four arguments per turn: the call's own cost (the client's and the server's) grows
#       little with its turns, and a session whose turns are all new (the common case) is read with one
#       ``struct.unpack`` call and no work per turn: an entry goes from its argument to RPUSH as it is.
#       Without flag 8 a turn's id is read off its entry when it is needed (the first field of its JSON).
# Returns one character per turn, in order: '0' already appended, '1' appended, '2' late (closed for
# longer than grace_s: not appended), '3' appended to a closed session within grace_s (it reopens: revision).
#
# A redelivered or replayed turn is appended once. The worker knows most turns are new: their results
# were just counted for the first time by the record script (its idempotency marks), and a turn is
# appended only after its result is recorded. Those turns are appended without a look: no mark per turn
# to read or write (the marks were ~15 % of this script's cost, and ~45 bytes a turn). A turn the worker
# cannot vouch for (its result was counted before, an agent run's step, an append call tried again) is
# looked up: the first such turn of a session marks it (``mk``): every turn in its list gets its mark
# ``i:{id}`` (read off the entries: the id is the first field of a turn's JSON), and from then on each
# turn appended to it gets its own mark too. So an unmarked session's list holds every turn ever appended
# to it (when the bounds bite, the session is marked before an entry is dropped), and its marks, once
# made, are complete. The closer also keeps one turn per id (streameval.features.sessions.closer): a turn whose
# result was counted afresh under another pair (a suite's new version) is not appended twice to the thread.
#
# The due index gets a session's deadline only when it must (a new or reopened session, a first end
# marker): deadlines only grow otherwise, and an early index entry costs the closer one look; its member
# is the session's name in its shard, ``ss:{name}:{key}`` (the end of its keys' names).
# A turn's entry is its event time (``%020.6f``: 20 characters) and its payload, appended (RPUSH, one per
# session and call) in arrival order: sorted by the 20 characters, stably, the entries are in event-time
# order, ties in arrival order. The order is made when the session is read, and in here only when the
# bounds bite: over max_turns or max_bytes the entry in the middle of that order is dropped (never the
# first or the last), turn by turn. Each entry counts 10 bytes more than its length toward max_bytes (the
# arrival number it once carried: the bounds bite where they always did, and offline alike).
# A session costs three commands a call however many turns it gets: HMGET (its figures, and the marks of
# turns to look up), RPUSH, HSET (figures and marks); EXPIRE when its TTL is renewed. Nothing per turn is
# parsed or formatted here: the worker sends each turn ready to store.
APPEND = (
    _UNPACK
    + """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local terms = {}
for j = 1, tonumber(ARGV[1]) do
  local b = 2 + (j - 1) * 6
  terms[j] = {tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]),
              tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 4]}
end
local blob = ARGV[2 + tonumber(ARGV[1]) * 6]
local codes, due = {}, {}
-- a session's due-index member is the end of its meta's name: ``P{sx:N}:meta:`` is the due index's
-- name (``P{sx:N}:due``) without ``due``, and ``meta:``
local member_at = #KEYS[1] - 3 + 6

local function order(all)  -- positions of the entries by event time, then arrival (list order)
  local at, pos = {}, {}
  for j = 1, #all do at[j], pos[j] = string.sub(all[j], 1, 20), j end
  table.sort(pos, function(x, y)
    if at[x] ~= at[y] then return at[x] < at[y] end
    return x < y
  end)
  return pos
end

local function mark_of(entry)  -- 'i:' .. the turn's id as its JSON writes it: {"id":"..." after the time
  if string.sub(entry, 21, 27) ~= '{"id":"' then return nil end
  local j = string.find(entry, '"', 28, true)
  if j and string.byte(entry, j - 1) == 92 then  -- a backslash before it: walk the escapes
    j = 28
    while true do
      local c = string.byte(entry, j)
      if not c or c == 34 then break end
      j = j + (c == 92 and 2 or 1)
    end
  end
  if not j or j > #entry then return nil end
  return 'i:' .. string.sub(entry, 28, j - 1)
end

local function marks_of(e, n)  -- the marks of the call's entries e .. e + n - 1
  local ids = {}
  for i = 1, n do ids[i] = mark_of(ARGV[e + i - 1]) or ('?' .. (e + i)) end  -- '?': not a turn's JSON
  return ids
end

-- mark every entry of an unmarked session's list (its marks are complete from then on): the fields and
-- values to add to the meta's HSET, and the marks as a set
local function mark_list(turns, marks)
  local known = {}
  for _, entry in ipairs(redis.call('LRANGE', turns, 0, -1)) do
    local id = mark_of(entry)
    if id and not known[id] then
      known[id] = true
      marks[#marks + 1] = id
      marks[#marks + 1] = '1'
    end
  end
  marks[#marks + 1] = 'mk'
  marks[#marks + 1] = '1'
  return known
end

local function session(turns, meta, low, high, t, n, flags, ends, ids, e, size)
  local gap, grace, max_turns, max_bytes, ttl, settle = unpack(terms[t])
  local look = flags % 8 >= 4 or flags >= 16  -- a turn to look up, or a session that keeps its marks
  ids = ids or ((look or flags % 4 >= 2) and marks_of(e, n)) or nil
  local m = look and redis.call('HMGET', meta, 'state', 'v', 'mk', unpack(ids, 1, n))
                 or redis.call('HMGET', meta, 'state', 'v', 'mk')
  local state = m[1]
  if state == 'closed' and now > tonumber(redis.call('HGET', meta, 'closed_at')) + grace then
    local known = {}  -- late: none is appended; one already there is a duplicate (its list kept grace_s + 1 min)
    if look and not m[3] then
      for _, entry in ipairs(redis.call('LRANGE', turns, 0, -1)) do known[mark_of(entry) or ''] = true end
    end
    for i = 1, n do codes[#codes + 1] = look and (m[3 + i] or known[ids[i]]) and '0' or '2' end
    return
  end
  local first, last, expires, kept, bytes, ended, seq, received, dropped, _ = nil, nil, nil, 0, 0, 0, 0, 0, 0
  if m[2] then
    first, last, expires, _, _, kept, bytes, ended, seq, received, dropped = struct.unpack('<dddddIIIIII', m[2])
  end
  ended = ended == 1
  local was_ended = ended
  local code = state == 'closed' and '3' or '1'
  local marked, marks, members, appended = m[3], {}, nil, ids
  local known = nil  -- the marks of an unmarked session's list, when a turn must be looked up there
  if look and not marked then
    if m[2] then
      known = mark_list(turns, marks)
    else  -- a new session: no list to read
      marks[1], marks[2] = 'mk', '1'
    end
    marked = true
  end
  local fresh = flags % 4 < 2  -- no id twice in this call (the worker says)
  if fresh and look then  -- and none found
    for i = 1, n do
      if m[3 + i] or (known and known[ids[i]]) then fresh = false break end
    end
  end
  if fresh then  -- every turn new and once (the common case): nothing to do per turn
    if flags % 2 == 1 then ended = true end
    codes[#codes + 1] = string.rep(code, n)
  else
    local seen = {}
    members, appended, size, low, high = {}, {}, 0, nil, nil
    for i = 1, n do
      local id = ids[i]
      if seen[id] or m[3 + i] or (known and known[id]) then
        codes[#codes + 1] = '0'
      else
        seen[id] = true
        local entry = ARGV[e + i - 1]
        members[#members + 1] = entry
        appended[#appended + 1] = id
        size = size + #entry + 10
        if string.byte(blob, ends + i - 1) == 49 then ended = true end  -- '1': the end marker
        local at = tonumber(string.sub(entry, 1, 20))
        if not low or at < low then low = at end
        if not high or at > high then high = at end
        codes[#codes + 1] = code
      end
    end
  end
  local added = members and #members or n
  if added == 0 then
    if #marks > 0 then redis.call('HSET', meta, unpack(marks)) end
    return
  end
  if not first or low < first then first = low end
  if not last or high > last then last = high end
  seq = seq + added
  if kept + added <= max_turns and bytes + size <= max_bytes then
    if members then redis.call('RPUSH', turns, unpack(members)) else redis.call('RPUSH', turns, unpack(ARGV, e, e + n - 1)) end
    kept, bytes = kept + added, bytes + size
  else  -- the bounds bite: turn by turn, the entry in the middle of the order goes
    members = members or {unpack(ARGV, e, e + n - 1)}
    if not marked then  -- a dropped turn keeps its mark: the list is marked before any entry goes
      mark_list(turns, marks)
      marked = true
    end
    for i = 1, added do
      redis.call('RPUSH', turns, members[i])
      kept, bytes = kept + 1, bytes + #members[i] + 10
      while (kept > max_turns or bytes > max_bytes) and kept > 2 do
        local all = redis.call('LRANGE', turns, 0, -1)
        local gone = all[order(all)[math.floor(kept / 2) + 1]]
        redis.call('LREM', turns, 1, gone)
        kept, bytes, dropped = kept - 1, bytes - #gone - 10, dropped + 1
      end
    end
  end
  -- never sooner than settle_s after this turn (an end marker's too): turns of the same moment may still be
  -- on their way from other partitions and workers
  local deadline = ended and now + settle or math.max(math.min(last, now) + gap, now + settle)
  local new_state = state
  if state == 'closed' then
    new_state, deadline = 'open', now  -- a late turn within grace: the next revision, at the closer's next tick
  elseif not state then
    new_state = 'open'
  end
  -- the TTL is renewed when less than half of it is left (not on every turn: two commands fewer)
  local renew = not expires or expires - now < ttl / 2 or state == 'closed'
  if renew then expires = now + ttl end
  local v = struct.pack('<dddddIIIIII', first, last, expires, deadline, now, kept, bytes, ended and 1 or 0, seq,
                        received + added, dropped)
  if marked then  -- a marked session's turns each get their mark
    appended = appended or marks_of(e, n)
    for i = 1, added do
      marks[#marks + 1] = appended[i]
      marks[#marks + 1] = '1'
    end
  end
  if #marks > 0 then
    marks[#marks + 1] = 'v'
    marks[#marks + 1] = v
    if new_state ~= state then
      marks[#marks + 1] = 'state'
      marks[#marks + 1] = new_state
    end
    redis.call('HSET', meta, unpack(marks))
  elseif new_state ~= state then
    redis.call('HSET', meta, 'v', v, 'state', new_state)
  else  -- the common case: one field
    redis.call('HSET', meta, 'v', v)
  end
  if renew then
    redis.call('EXPIRE', turns, terms[t][7])
    redis.call('EXPIRE', meta, terms[t][7])
  end
  -- the due index needs this deadline only when it is new or earlier than the entry there (a new or reopened
  -- session, a first end marker); otherwise deadlines only grow and the closer's claim finds the later one
  if not state or state == 'closed' or (ended and not was_ended) then
    due[#due + 1] = due_score(deadline)
    due[#due + 1] = 'ss:' .. string.sub(meta, member_at)
  end
end

local pos, k, e, size = 1, 2, 3 + tonumber(ARGV[1]) * 6, #blob
while pos <= size do
  local low, high, t, n, flags, bytes, ends
  low, high, t, n, flags, bytes, pos = struct.unpack('<ddHI4BI4', blob, pos)
  ends, pos = pos, pos + n
  local ids = nil
  if flags % 16 >= 8 then  -- the turns' marks follow
    ids = {struct.unpack(string.rep('I4c0', n), blob, pos)}
    pos, ids[n + 1] = ids[n + 1], nil
  end
  session(KEYS[k], KEYS[k + 1], low, high, t, n, flags, ends, ids, e, bytes)
  k, e = k + 2, e + n
end
for i = 1, #due, 1000 do
  redis.call('ZADD', KEYS[1], unpack(due, i, math.min(#due, i + 999)))
end
return table.concat(codes)
"""
)

# Claim a due session for closing. KEYS: 1 turns, 2 meta, 3 lease, 4 the shard's due zset.
# ARGV: 1 worker id, 2 lease ms, 3 the session's due-index member, 4 the score the closer read there.
# Returns {'gone'} (expired), {'closed'} (closed already), {'later', deadline} (a turn moved it),
# {'busy'} (another worker holds the lease), or {'ok', now, seq, rev, first, last, arrival, end, n,
# dropped, prev, closed_by of the previous revision, turns...} with the session marked closing. Gone or
# closed, its due entry is dropped; later, moved to the deadline (either only if the entry still holds
# the score read: an appender that set another deadline meanwhile wins).
CLAIM = (
    _UNPACK
    + """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local h = redis.call('HMGET', KEYS[2], 'state', 'v', 'rev', 'prev', 'closed_by')
local m = {h[1]}
if h[2] then  -- state, deadline, seq, rev, first, last, arrival, end, n, dropped, prev, closed_by
  local v = unpack_v(h[2])
  local f = function(x) return string.format('%.17g', x) end
  m = {h[1], f(v[4]), v[9], h[3], f(v[1]), f(v[2]), f(v[5]), tostring(v[8]), v[10], v[11], h[4], h[5]}
end
local function move(deadline)
  local score = redis.call('ZSCORE', KEYS[4], ARGV[3])
  if not score or tonumber(score) ~= tonumber(ARGV[4]) then return end
  if deadline then redis.call('ZADD', KEYS[4], deadline, ARGV[3]) else redis.call('ZREM', KEYS[4], ARGV[3]) end
end
if not m[1] then move(nil) return {'gone'} end
if m[1] == 'closed' then move(nil) return {'closed'} end
if tonumber(m[2]) > now then move(due_score(tonumber(m[2]))) return {'later', m[2]} end
if not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'busy'} end
redis.call('HSET', KEYS[2], 'state', 'closing')
local out = {'ok', string.format('%.6f', now), m[3], m[4] or '0', m[5], m[6], m[7], m[8], m[9], m[10] or '0',
             m[11] or '', m[12] or ''}
for _, member in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do out[#out + 1] = member end
return out
"""
)

# After publishing: the session is closed (kept grace_s for late turns), or reopened when turns came in
# while it was being closed. KEYS: 1 turns, 2 meta, 3 lease, 4 the shard's due zset.
# ARGV: 1 worker id, 2 seq at the claim, 3 next revision, 4 the published result (for the next
#       revision's correction of the aggregates), 5 grace_s, 6 how long the closed session's meta stays
#       (late turns after grace are told apart from new sessions), 7 closed_by, 8 the session's due-index
#       member, 9 the score the closer read there.
# Returns {'lost'} (the lease expired and another worker took over: its entry is that worker's),
# {'closed'} (the due entry dropped), {'reopened', deadline} (the entry moved to the deadline); the entry
# only if it still holds the score read (the turns that reopened it may have set it themselves).
FINISH = (
    _UNPACK
    + """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {'lost'} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
redis.call('HSET', KEYS[2], 'rev', ARGV[3], 'prev', ARGV[4], 'closed_at', string.format('%.6f', now), 'closed_by', ARGV[7])
redis.call('DEL', KEYS[3])
local score = redis.call('ZSCORE', KEYS[4], ARGV[8])
local mine = score and tonumber(score) == tonumber(ARGV[9])
local v = unpack_v(redis.call('HGET', KEYS[2], 'v'))
if v[9] > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[2], 'state', 'open')
  local deadline = string.format('%.17g', v[4])
  if mine then redis.call('ZADD', KEYS[4], due_score(v[4]), ARGV[8]) end
  return {'reopened', deadline}
end
redis.call('HSET', KEYS[2], 'state', 'closed')
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[5])) + 60)
redis.call('EXPIRE', KEYS[2], math.ceil(tonumber(ARGV[5]) + tonumber(ARGV[6])))
if mine then redis.call('ZREM', KEYS[4], ARGV[8]) end
return {'closed'}
"""
)

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

# Keep a closing lease while its session is being judged (judges can take longer than the lease): extend it
# only while this worker still holds it. KEYS: 1 the lease. ARGV: 1 worker id, 2 lease ms.
# Returns 1 (extended) or 0 (lost: it ran out and another worker may hold it now, or the closing finished).
RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""
