package redislimit

import (
	"crypto/sha1"
	"encoding/hex"
)

// The scripts of the rules that NewRule decides in Redis: the fixed window on
// UTC boundaries, the sliding counter, the exact sliding log, the rolling
// window, the anchored window, GCRA, and bands of them. One script decides every rule, from the
// bands' kinds and parameters in its arguments; a second gives an admission
// back.
//
// # State
//
// A key's state is one Redis string of 8-byte words, big-endian unsigned
// integers below 2^53 (exact in Lua's doubles), the bands' words one after
// another as in process (algo.Set), and every time a whole number of µs on
// Redis TIME since the Unix epoch:
//
//	band      words    what they hold
//	GCRA      1        TAT
//	fixed     2        window index w (windows since the grid's origin G), count
//	counter   3        window index w, count of w−1 (prev), count of w (cur)
//	log       1 + N    head k ∈ [0, N), then the N slots: expiries e + W
//	rolling   2 + 2K   head: slice index h (slices of P since the Unix
//	                   epoch), its count; then K slots, slot j mod K holding
//	                   (j, the final count of slice j) once the head has
//	                   passed j (window.RollingParams' words, two per word)
//	anchored  3        the anchor A, a multiple of the resolution g
//	                   (window.AnchoredParams) in ns since the Unix epoch,
//	                   as its whole µs and the ns beyond them (< 1000),
//	                   then the count: a count ≥ 1 is the open window
//	                   [A, A + W); a count of 0, the earliest a window may
//	                   open (A is always on g's grid from the Unix epoch)
//
// An absent key reads as every word 0, which is each algorithm's fresh
// state, as the zero word is in process: a full bucket, a count of 0 in a
// window long past, a ring whose every slot expired at 0, a head in slice
// 0 with nothing counted, no anchored window and none before the Unix
// epoch. The first admission allocates the whole string, zero-filled;
// every admission
// writes the bands' new words (SETRANGE) and sets the expiry; a denial, a
// peek and n < 1 write nothing.
//
// A value that is not a state of the rule (another type, another length, a
// word of 2^53 or more, an anchor with 1000 ns or more beyond its µs, or a
// state idle later than any the rule writes,
// b.after past now, with no expiry: it could deny for ever; or one idle
// more than 2·b.after past now, expiry or not: it could deny for as long
// as its expiry, a year for SET key <value> EX <a year>) is repaired by
// the decision that finds it, as decideLua repairs GCRA's TAT: every
// band's strictest state at now (GCRA's TAT now + B·T, a window's count N,
// the counter's current count N, every slot of the log expiring at
// now + W, the rolling window's head holding Q, an anchored window opened
// at now with its count N), with the usual expiry,
// and the decision is made on it; the reply then ends with what the key
// held (ErrCorrupt). The refund script gives nothing back from such a key
// and writes nothing.
//
// The expiry is ⌈(I − now)/1 ms⌉ + 1 ms, I the latest instant at which a
// band of the new state becomes idle, as in process (algo.Algorithm's
// Idle): a GCRA band at its TAT, a fixed window at the end of its window
// (of the next one for the counter, whose count is then prev), the log when
// its latest expiry passes, the rolling window when its head's slice
// leaves the window, K slices on, the anchored window at its window's end
// (in µs, rounded up). From I on the state decides every request as
// the absent key does, so expiry changes no decision (on TIME readings that
// do not go back). The extra millisecond covers the expiry clock, which
// Redis may read before the script reads TIME.
//
// # Arguments
//
// ARGV[1] is the op ('0' peeks, any other takes), ARGV[2] n, ARGV[3] an
// explicit now in µs (tests only; '' reads TIME), then five per band: its
// kind and four parameters, in µs and counts:
//
//	'g' T, B·T, B, 0    (T rounded up to whole µs, as New does)
//	'f' W, G, N, 0      (G ≤ 0: the boundary at or before the Unix epoch)
//	'c' W, G, N, 0
//	'l' W, N, 0, 0
//	'r' P, K, Q, C      (C: the cap per slice, Q if none)
//	'a' W, N, g, 0      (g in ns: a power of two, at most 2^49)
//
// # Reply
//
// {now, admitted, then per band the state as it was read, before the call}:
//
//	GCRA      debt = max(TAT − now, 0)
//	fixed     w, count
//	counter   w, prev, cur
//	log       e (slots expired at now), the oldest expiry (slot k),
//	          the next one (slot k+1), the latest (slot k−1)
//	rolling   its 2 + 2K words
//	anchored  its 3 words
//
// from which the caller rebuilds the whole gcra.Decision with the
// in-process code (rule_bands.go).

// wordsLua is what both scripts share: the exact integer arithmetic and the
// words' encoding.
//
// idiv is ⌊a/b⌋ for integers 0 ≤ a < 2^53 and b ≥ 1, and the floor of
// the doubles' quotient is exact: with a = q·b + r, 0 ≤ r < b, the quotient
// a/b = q + r/b lies at least 1/b below q + 1, and the division's rounding
// error is at most half an ulp, ≤ (a/b)·2^−53 < 1/b, so the rounded value
// stays below q + 1; it is at least q, which is a double. (Every a the
// scripts divide is a time since G ≤ 0, or a duration: never negative.)
//
// le(a, b, c, d) is a·b ≤ c·d exactly, for integers 0 ≤ a, b, c, d < 2^53,
// whose products need up to 106 bits: each factor is split into three
// limbs of 18 bits, each product of limbs is below 2^36 and each column of
// at most three below 2^38, so every step is exact; the carries then bring
// both products to six limbs, compared from the top.
const wordsLua = `
local P32 = 4294967296
local L = 262144

local function idiv(a, b)
  return math.floor(a / b)
end

local function limbs(x)
  local x0 = x % L
  x = (x - x0) / L
  local x1 = x % L
  return x0, x1, (x - x1) / L
end

local function le(a, b, c, d)
  local a0, a1, a2 = limbs(a)
  local b0, b1, b2 = limbs(b)
  local c0, c1, c2 = limbs(c)
  local d0, d1, d2 = limbs(d)
  local x = {a0*b0, a0*b1 + a1*b0, a0*b2 + a1*b1 + a2*b0, a1*b2 + a2*b1, a2*b2, 0}
  local y = {c0*d0, c0*d1 + c1*d0, c0*d2 + c1*d1 + c2*d0, c1*d2 + c2*d1, c2*d2, 0}
  for i = 1, 5 do
    local cx, cy = math.floor(x[i] / L), math.floor(y[i] / L)
    x[i], y[i] = x[i] - cx * L, y[i] - cy * L
    x[i+1], y[i+1] = x[i+1] + cx, y[i+1] + cy
  end
  for i = 6, 1, -1 do
    if x[i] ~= y[i] then return x[i] < y[i] end
  end
  return true
end

-- aup is the anchor of a window opened at now (µs): ⌈now·1000/g⌉·g ns, as
-- its whole µs and the ns beyond them. For g ≤ 8, g divides 1000 and now·1000
-- is on the grid; else now·1000 mod g = 8·(125·(now mod g/8) mod g/8), whose
-- products stay below 2^53 for g ≤ 2^49 (maxAnchorResolution).
local function aup(now, g)
  if g <= 8 then return now, 0 end
  local g8 = g / 8
  local up = (g - 8 * ((125 * (now % g8)) % g8)) % g
  return now + math.floor(up / 1000), up % 1000
end

-- before(a1, r1, a2, r2) orders two instants given as whole µs and the ns
-- beyond them: a1 µs + r1 ns < a2 µs + r2 ns.
local function before(a1, r1, a2, r2)
  return a1 < a2 or (a1 == a2 and r1 < r2)
end

local function enc(v)
  local hi = math.floor(v / P32)
  local lo = v - hi * P32
  return string.char(0, math.floor(hi / 65536), math.floor(hi / 256) % 256, hi % 256,
    math.floor(lo / 16777216), math.floor(lo / 65536) % 256, math.floor(lo / 256) % 256, lo % 256)
end

local key = KEYS[1]
-- what: what the key holds when that is not a state of the rule (nil while
-- it is one, or absent)
local what = nil
local len = redis.pcall('STRLEN', key)
if type(len) == 'table' then
  if not len.err or string.sub(len.err, 1, 10) ~= 'WRONGTYPE ' then return len end
  what = 'a value of type ' .. redis.call('TYPE', key).ok
  len = 0
end
local big = false
local function dec(s, i)
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(s, i, i + 7)
  if b1 ~= 0 or b2 >= 32 then
    big = true
    return 0
  end
  return ((b2 * 256 + b3) * 256 + b4) * P32 + ((b5 * 256 + b6) * 256 + b7) * 256 + b8
end
local function word(j)
  if len == 0 then return 0 end
  return dec(redis.call('GETRANGE', key, 8 * j, 8 * j + 7), 1)
end
-- words j … j+m−1, read at once
local function words(j, m)
  local t = {}
  if len == 0 then
    for x = 1, m do t[x] = 0 end
    return t
  end
  local s = redis.call('GETRANGE', key, 8 * j, 8 * (j + m) - 1)
  for x = 1, m do t[x] = dec(s, 8 * x - 7) end
  return t
end
`

// ruleLua decides n on every band of a rule at once, atomically: each band
// is decided on its state as read, exactly as in process (the line of each
// kind below is its in-process Admit, on µs), and only if every band
// admits are the new words written, every band's. So a request is admitted
// by all of them or by none, and a denial writes nothing: no refund is
// needed (in process, a band that passed the check can still deny; here
// nothing runs between the check and the writes).
//
//	GCRA     debt = max(TAT − now, 0); admit ⇔ 1 ≤ n ≤ B and debt + n·T ≤ B·T;
//	         TAT ← now + debt + n·T
//	fixed    w = ⌊(now − G)/W⌋, count 0 if w > the stored w, else the stored
//	         window and count (a stale now counts in the newer window);
//	         admit ⇔ 1 ≤ n ≤ N and count + n ≤ N; count ← count + n
//	counter  the view of window.CounterParams: w = ⌊(now − G)/W⌋ and the
//	         counts shifted to it, or, for a stale now, the stored window at
//	         its start; pos = now − (G + w·W);
//	         admit ⇔ 1 ≤ n ≤ N, cur + n ≤ N and prev·(W − pos) ≤ (N − cur − n)·W
//	         (le: exact); cur ← cur + n
//	log      admit ⇔ n = 1 and the oldest expiry ≤ now;
//	         slot k ← max(now + W, latest), k ← k + 1 mod N
//	rolling  s = max(⌊now/P⌋, h) (a stale now counts in the head's slice);
//	         cs = the head's count if s = h, else 0; sum = the counts of
//	         the slices (s − K, s]: cs, the head's, and the slots' below h
//	         whose index is their slice (an older one counts 0);
//	         admit ⇔ 1 ≤ n ≤ C, cs + n ≤ C and sum + n ≤ Q;
//	         if s > h, slot h mod K ← (h, its count); head ← (s, cs + n)
//	anchored (A, c) = the stored window if c ≥ 1 and now < A + W (a stale
//	         now counts in it), else (max(A, ⌈now/g⌉·g), 0): aup, in ns
//	         as µs and the ns beyond them, compared exactly (before);
//	         admit ⇔ 1 ≤ n ≤ N and c + n ≤ N; (A, c) ← (A, c + n)
//
// n = 0 is admitted by every band and writes nothing. e, the slots of the
// ring expired at now, is found by binary search (the expiries never
// decrease from the oldest to the latest): at most ⌈log2 N⌉ + 4 reads.
const ruleLua = preludeLua + wordsLua + `
local op = ARGV[1]
local n = tonumber(ARGV[2])
local now = now_us(ARGV[3])

local bands, size = {}, 0
local i = 4
while ARGV[i] do
  local b = {kind = ARGV[i], p = tonumber(ARGV[i+1]), q = tonumber(ARGV[i+2]), r = tonumber(ARGV[i+3]), s = tonumber(ARGV[i+4]), off = size}
  -- b.after: the longest a state this rule writes takes to become idle (the
  -- anchored window: W, and its anchor rounded up by less than g, in µs)
  if b.kind == 'g' then size, b.after = size + 1, b.q
  elseif b.kind == 'f' then size, b.after = size + 2, b.p
  elseif b.kind == 'c' then size, b.after = size + 3, 2 * b.p
  elseif b.kind == 'l' then size, b.after = size + 1 + b.q, b.p
  elseif b.kind == 'r' then size, b.after = size + 2 + 2 * b.q, b.p * b.q
  elseif b.kind == 'a' then size, b.after = size + 3, b.p + math.ceil((b.r - 1) / 1000)
  else return redis.error_reply('ERR redislimit: unknown band kind ' .. b.kind) end
  bands[#bands + 1] = b
  i = i + 5
end
if not what and len ~= 0 and len ~= 8 * size then
  what = string.format('%d bytes, not the %d of this rule', len, 8 * size)
end

-- pass decides n on every band's state as stored, and notes b.was (when
-- that state becomes idle), b.ok, b.next and b.idle (the words an
-- admission writes, and when they become idle).
local ok, reply
-- odd: a reason the words read are no state of the rule, if pass found one
local odd = nil
local function pass()
  ok, reply = true, {now, 0}
  for _, b in ipairs(bands) do
    local o = b.off
    if b.kind == 'g' then
      local T, span, B = b.p, b.q, b.r
      local tat = word(o)
      local debt = 0
      if tat > now then debt = tat - now end
      b.was = tat
      b.ok = n == 0 or (n >= 1 and n <= B and debt + n * T <= span)
      b.idle = now + debt + n * T
      b.next = {{o, b.idle}}
      reply[#reply + 1] = debt
    elseif b.kind == 'f' then
      local W, G, N = b.p, b.q, b.r
      local sw, c = word(o), word(o + 1)
      reply[#reply + 1] = sw
      reply[#reply + 1] = c
      b.was = G + sw * W
      if c > 0 then b.was = b.was + W end
      local w = idiv(now - G, W)
      if w > sw then c = 0 else w = sw end
      b.ok = n == 0 or (n >= 1 and n <= N and c + n <= N)
      b.next = {{o, w}, {o + 1, c + n}}
      b.idle = G + (w + 1) * W
    elseif b.kind == 'c' then
      local W, G, N = b.p, b.q, b.r
      local sw, prev, cur = word(o), word(o + 1), word(o + 2)
      reply[#reply + 1] = sw
      reply[#reply + 1] = prev
      reply[#reply + 1] = cur
      b.was = G + sw * W
      if cur > 0 then b.was = b.was + 2 * W elseif prev > 0 then b.was = b.was + W end
      local t = now
      local w = idiv(t - G, W)
      if w == sw + 1 then prev, cur = cur, 0
      elseif w > sw + 1 then prev, cur = 0, 0
      elseif w < sw then w, t = sw, G + sw * W end
      local pos = t - (G + w * W)
      b.ok = n == 0 or (n >= 1 and n <= N and cur + n <= N and le(prev, W - pos, N - cur - n, W))
      b.next = {{o, w}, {o + 1, prev}, {o + 2, cur + n}}
      b.idle = G + (w + 2) * W
    elseif b.kind == 'r' then
      local P, K, Q, C = b.p, b.q, b.r, b.s
      local hc = words(o, 2 + 2 * K)
      local h, c = hc[1], hc[2]
      for x = 1, 2 + 2 * K do reply[#reply + 1] = hc[x] end
      local last = -1 -- the latest slice with a count
      if c > 0 then last = h end
      for x = 3, 1 + 2 * K, 2 do
        if hc[x + 1] > 0 and hc[x] > last then last = hc[x] end
      end
      b.was = h * P
      if last >= 0 then b.was = (last + K) * P end
      local s = idiv(now, P)
      if h > s then s = h end
      local cs = 0
      if s == h then cs = c end
      local sum = cs
      for j = math.max(s - K + 1, 0), s - 1 do
        if j == h then sum = sum + c
        elseif j < h then
          local x = 3 + 2 * (j % K)
          if hc[x] == j then sum = sum + hc[x + 1] end
        end
      end
      b.ok = n == 0 or (n >= 1 and n <= C and cs + n <= C and sum + n <= Q)
      b.next = {{o, s}, {o + 1, cs + n}}
      if s > h then
        local x = o + 2 + 2 * (h % K)
        b.next[3], b.next[4] = {x, h}, {x + 1, c}
      end
      b.idle = (s + K) * P
    elseif b.kind == 'a' then
      local W, N, g = b.p, b.q, b.r
      local a, r, c = word(o), word(o + 1), word(o + 2)
      reply[#reply + 1] = a
      reply[#reply + 1] = r
      reply[#reply + 1] = c
      if r >= 1000 then odd = 'an anchor with 1000 ns or more beyond its µs' end
      -- idle at the window's end if one is open, else from the anchor
      -- (µs, rounded up)
      local up = 0
      if r > 0 then up = 1 end
      b.was = a + up
      if c > 0 then b.was = b.was + W end
      -- the window a request at now counts in: the stored one while it is
      -- open at now (a stale now included), else a new one at the later of
      -- now's anchor and the stored earliest anchor
      if not (c > 0 and before(now, 0, a + W, r)) then
        c = 0
        local na, nr = aup(now, g)
        if before(a, r, na, nr) then a, r = na, nr end
      end
      b.ok = n == 0 or (n >= 1 and n <= N and c + n <= N)
      b.next = {{o, a}, {o + 1, r}, {o + 2, c + n}}
      b.idle = a + W
      if r > 0 then b.idle = b.idle + 1 end
    else
      local W, N = b.p, b.q
      local k = word(o)
      local function slot(j) return word(o + 1 + j % N) end
      local oldest, second, latest = slot(k), slot(k + 1), slot(k + N - 1)
      local e = 0
      if latest <= now then e = N
      elseif oldest <= now then
        -- slot k expired, slot k−1 not: the first of k+1 … k+N−1 not expired
        local lo, hi = 1, N - 1
        while lo < hi do
          local mid = math.floor((lo + hi) / 2)
          if slot(k + mid) <= now then lo = mid + 1 else hi = mid end
        end
        e = lo
      end
      b.was = latest
      b.ok = n == 0 or (n == 1 and oldest <= now)
      b.idle = math.max(now + W, latest)
      b.next = {{o + 1 + k, b.idle}, {o, (k + 1) % N}}
      reply[#reply + 1] = e
      reply[#reply + 1] = oldest
      reply[#reply + 1] = second
      reply[#reply + 1] = latest
    end
    ok = ok and b.ok
  end
end

if not what then
  pass()
  if big then
    what = 'a word of 2^53 or more'
  elseif odd then
    what = odd
  else
    -- A state idle later than any this rule writes can only be one that
    -- another writer stored: with no expiry it would deny for ever, and
    -- more than twice as late, for as long as its expiry says (a year,
    -- for SET key <value> EX <a year>). The second b.after is what TIME
    -- may step back (a failover) before a state this rule wrote is taken
    -- for corrupt.
    for _, b in ipairs(bands) do
      if b.was - now > 2 * b.after then
        what = string.format('a state idle %.0fµs from now, more than twice the longest a state of this rule waits', b.was - now)
        break
      elseif b.was - now > b.after and redis.call('PTTL', key) < 0 then
        what = string.format('a state idle %.0fµs from now, with no expiry', b.was - now)
        break
      end
    end
  end
end
if what then
  -- The repair: every band's strictest state at now, expiring as every
  -- state does, and the decision made on it.
  redis.call('DEL', key)
  redis.call('SETRANGE', key, 8 * size - 1, '\0')
  len, big, odd = 8 * size, false, nil
  for _, b in ipairs(bands) do
    local o = b.off
    if b.kind == 'g' then
      redis.call('SETRANGE', key, 8 * o, enc(now + b.q))
    elseif b.kind == 'f' then
      redis.call('SETRANGE', key, 8 * o, enc(idiv(now - b.q, b.p)) .. enc(b.r))
    elseif b.kind == 'c' then
      redis.call('SETRANGE', key, 8 * o, enc(idiv(now - b.q, b.p)) .. enc(0) .. enc(b.r))
    elseif b.kind == 'r' then
      redis.call('SETRANGE', key, 8 * o, enc(idiv(now, b.p)) .. enc(b.r))
    elseif b.kind == 'a' then
      local a, r = aup(now, b.r)
      redis.call('SETRANGE', key, 8 * o, enc(a) .. enc(r) .. enc(b.q))
    else
      redis.call('SETRANGE', key, 8 * (o + 1), string.rep(enc(now + b.p), b.q))
    end
  end
  pass()
  local idle = now
  for _, b in ipairs(bands) do
    if b.was > idle then idle = b.was end
  end
  redis.call('PEXPIRE', key, idiv(idle - now + 999, 1000) + 1)
end
if ok then
  reply[2] = 1
  if op ~= '0' and n >= 1 then
    -- First the whole string, zero-filled, then every band's words.
    if len == 0 then redis.call('SETRANGE', key, 8 * size - 1, '\0') end
    local idle = now
    for _, b in ipairs(bands) do
      for _, w in ipairs(b.next) do
        redis.call('SETRANGE', key, 8 * w[1], enc(w[2]))
      end
      if b.idle > idle then idle = b.idle end
    end
    redis.call('PEXPIRE', key, idiv(idle - now + 999, 1000) + 1)
  end
end
if what then reply[#reply + 1] = what end
return reply
`

// ruleRefundLua gives back the n of an admission of a rule of one fixed,
// counter, rolling or anchored band (ARGV: the kind, the most n, n, the
// receipt's first value, the state's words, then for the anchored window
// the receipt's other two values, W in µs, g in ns, and in tests only an
// explicit now in µs), exactly as the in-process Refund of each does.
//
// The fixed, counter and rolling windows: the receipt names the window
// (slice) w the admission was counted in; n comes back from the count of w
// while the state counts w (cur for the counter, the head's for the
// rolling window), from prev once the counter has moved to w + 1; else
// nothing (a rolling slice the head has left is final). They read no
// clock: neither does the in-process give-back.
//
// The anchored window (window.AnchoredParams.Refund): the receipt names
// the window's anchor A_r (µs and ns) and the count c_r right after the
// admission. The state (A, c) still counts that window while c ≥ n and
// A_r ≤ A < A_r + W (a window whose anchor a give-back moved keeps its
// later admissions). If the admission was not the window's first
// (c_r > n), or is alone in it (c = n), n comes back from the count. If it
// opened the window and others came after it, the window's anchor moves to
// max(A, ⌈now/g⌉·g), now = max(TIME, A_r) (A_r stands for the admission's
// time, which is within g before it and gives the same result), and the
// count falls by n; nothing if now is past the window's end. The move only
// delays the window's end, so the expiry is set again, at the new end.
//
// Counts add, so every path leaves exactly the count of the other
// admissions: it never creates quota. It replies 1 if it gave back, else 0,
// and otherwise keeps the key's expiry (the state only becomes idle
// sooner).
const ruleRefundLua = preludeLua + wordsLua + `
local kind, N, n, a, size = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
-- Nothing to give back from an absent key, nor from one that is not a
-- state of the rule (the next decision repairs it).
if what or len ~= 8 * size then return 0 end
local w, c1, c2 = word(0), word(1), 0
if kind == 'c' or kind == 'a' then c2 = word(2) end
if big then return 0 end
if n < 1 or n > N then return 0 end
if kind == 'f' or kind == 'r' then
  if w == a and c1 >= n then
    redis.call('SETRANGE', key, 8, enc(c1 - n))
    return 1
  end
elseif kind == 'a' then
  local r, c = c1, c2
  local ar, cr, W, g = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  if r >= 1000 or c < n or before(w, r, a, ar) or not before(w, r, a + W, ar) then
    return 0 -- not the window it was counted in
  end
  if cr > n or c == n then
    redis.call('SETRANGE', key, 16, enc(c - n))
    return 1
  end
  local now = now_us(ARGV[10])
  -- t = max(now, A_r), and its anchor ⌈t/g⌉·g (A_r is on the grid)
  local ta, tr = now, 0
  if before(now, 0, a, ar) then ta, tr = a, ar end
  if not before(ta, tr, w + W, r) then return 0 end -- the window is over
  local na, nr = ta, tr
  if tr == 0 then na, nr = aup(ta, g) end
  if before(w, r, na, nr) then w, r = na, nr end
  redis.call('SETRANGE', key, 0, enc(w) .. enc(r) .. enc(c - n))
  local idle = w + W - now
  if r > 0 then idle = idle + 1 end
  redis.call('PEXPIRE', key, idiv(idle + 999, 1000) + 1)
  return 1
elseif w == a and c2 >= n then
  redis.call('SETRANGE', key, 16, enc(c2 - n))
  return 1
elseif w == a + 1 and c1 >= n then
  redis.call('SETRANGE', key, 8, enc(c1 - n))
  return 1
end
return 0
`

var (
	ruleScript       = newScript(ruleLua)
	ruleRefundScript = newScript(ruleRefundLua)
)

// newScript names src by its SHA-1, as EVALSHA does.
func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	return script{src, hex.EncodeToString(h[:])}
}
