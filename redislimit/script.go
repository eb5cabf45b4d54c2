package redislimit

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// decideLua is the whole decision, run atomically by Redis. It is gcra's
// Reserve, in microseconds, on Redis TIME; with maxWait 0 but for op '4':
//
//	debt  = max(TAT − now, 0)           (TAT absent: 0, a full bucket)
//	wait  = debt + n·T − B·T            (≤ 0: the tokens are there now)
//	admit ⇔ n ≥ 1 and wait ≤ maxWait   (n ≤ B is checked by the caller)
//	admit and store: TAT ← now + debt + n·T, expiring once the bucket is full
//
// ARGV[4] is the op: '0' peeks, '1' takes, '2' takes and reports what a
// give-back of the admission needs, '3' leases: it takes k = min(n,
// ⌊(B·T − debt)/T⌋) tokens, as many as fit up to n, if k ≥ ARGV[6] (the
// request the lease is for; else it takes nothing), and replies
// {debt·2 + admitted, k or 0}, so that a nearly empty bucket still leases
// what it has (lease.go). The quotient of doubles may round up to the next
// integer; the script then steps k back, so that debt + k·T ≤ B·T holds
// exactly. '4' reserves: it admits if wait ≤ ARGV[6] (maxWait, µs, at most
// gcra.MaxWait), a reservation that queues (wait > 0) stamps the key's
// queue (below), and it replies {admitted, wait, stored TAT or 0, now, the
// key's latest stamp}: the wait, and what the reservation's Cancel needs
// (refundLua), or the wait a denied one would have needed. Otherwise the
// script returns debt·2 + admitted, one integer, from which the caller
// rebuilds the whole gcra.Decision (every field depends on TAT only
// through debt); with op '2', when it stored, {debt·2 + admitted, stored
// TAT, now, the key's latest stamp}: Take's receipt (refundLua), and
// otherwise the reply of op '1', so that a denial costs Take what it costs
// Allow (one integer to read). A denial and a peek write nothing.
// Every value is a whole number of microseconds below 2^53, so the doubles
// of Lua are exact (see the package doc); string.format('%.0f') writes them
// exactly, as an integer, and Redis converts a returned number to an
// integer reply exactly.
//
// # The stored value
//
// "TAT", "TAT:E" with E ≥ 1, or "TAT:E:Q" with Q ≥ 1, all decimal µs: E is
// the key's give-back epoch and Q its queue stamp, each 0 when absent.
// Both are stamps of one sequence, each new one max(E, Q) + 1 or now,
// whichever is later: E is stamped by a give-back that shifted other
// admissions (refundLua), Q by a reservation that queued (wait > 0). A
// receipt (Take's, or a reservation's) holds the latest stamp max(E, Q) of
// its decision, its own queue stamp included; at its give-back E above it
// says that some give-back since shifted admissions, Q above it that some
// reservation since queued: what in process a stripe's counters say
// (gcra.Since). The values written before the epoch existed are the first
// form, and those written before reservations the first two: they read as
// E = 0 and Q = 0, and a receipt of theirs holds E, which is max(E, 0):
// an upgrade changes no decision and no give-back. Only a shifting
// give-back writes the second form, only a queued reservation the third,
// and every write keeps them: an admission stores the E and Q it read. A
// key with an epoch expires no sooner than E + B·T (refundLua says why);
// one without, once the bucket is full (a queue stamp needs no more: once
// the bucket is full, every reservation is due).
//
// The value is validated before use (ErrCorrupt): TAT, E and Q are 1 to 16
// decimal digits below 2^53; TAT is at most 2·B·T ahead of now, and at most
// B·T ahead unless the key has an expiry; E and Q at most 2·B·T ahead. A
// reservation stores TAT ≤ now + B·T + gcra.MaxWait: a key with a queue
// stamp may be that much further ahead. A take or a lease stores TAT ≤ now
// + B·T, and a stamp is now (or one more than the last, within the same
// µs): the second B·T lets Redis TIME step back by up to B·T (a failover)
// without a repair. Anything else (another type, caught by pcall; "inf", "1e19",
// "nan", "0x10", which tonumber would turn into a non-integer; a number far
// outside any TAT; a TAT a year ahead with a year's expiry, which would lock
// the key out for that year) is replaced, in this call, by the empty bucket
// TAT = now + B·T with the usual expiry and no stamps, and the decision is
// made on that; the reply of ops '0' to '3' is then {debt·2 + admitted, 0,
// what the key held}: a repaired state denies every n ≥ 1 (and the caller
// sends op '0' for n = 0), so nothing is stored; op '4' reserves behind
// the repair as on any state, and adds what the key held to its reply.
// Other errors of GET (NOPERM) are returned as they are.
//
// ARGV[5] is set only in tests: an explicit now in µs, so that the decision
// vectors can run on a timeline. Production calls pass four arguments (or
// an empty ARGV[5] for ops '3' and '4') and the script reads TIME.
const decideLua = preludeLua + `
local now = now_us(ARGV[5])
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
` + stateLua + `
local v = redis.pcall('GET', KEYS[1])
local tat, bad = 0, nil
if type(v) == 'table' then
  if not v.err or string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then return v end
  bad = 'a value of type ' .. redis.call('TYPE', KEYS[1]).ok
elseif v then
  tat, ep, qs, bad = parse(v, now, span)
end
if bad then
  tat = now + span
  store(tat)
end
local debt = 0
if tat > now then debt = tat - now end
local ok = 0
local stored = 0
if ARGV[4] == '4' then
  local wait = (debt - span) + n * T
  if wait <= tonumber(ARGV[6]) then
    ok = 1
    if wait > 0 then qs = stamp() end
    stored = now + debt + n * T
    store(stored)
  end
  if bad then return {ok, wait, stored, now, math.max(ep, qs), bad} end
  return {ok, wait, stored, now, math.max(ep, qs)}
end
if n == 0 then
  ok = 1
elseif ARGV[4] == '3' then
  local k = math.floor((span - debt) / T)
  if debt + k * T > span then k = k - 1 end
  if k > n then k = n end
  if k >= tonumber(ARGV[6]) then
    ok = 1
    stored = k
    store(now + debt + k * T)
  end
elseif n >= 1 and debt + n * T <= span then
  ok = 1
  if ARGV[4] ~= '0' then
    stored = now + debt + n * T
    store(stored)
  end
end
if ARGV[4] == '2' and stored > 0 then return {debt * 2 + ok, stored, now, math.max(ep, qs)} end
if bad then return {debt * 2 + ok, stored, bad} end
if ARGV[4] == '3' then return {debt * 2 + ok, stored} end
return debt * 2 + ok
`

// preludeLua begins every script: effects replication where Redis needs
// it asked for (before 5.0), and now_us, the time in µs: the explicit time
// a test passes, or Redis's TIME when the argument is absent or empty.
const preludeLua = `
if redis.replicate_commands then redis.replicate_commands() end
local function now_us(arg)
  if arg and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
`

// stateLua is what decideLua and refundLua share: the stored value's
// parsing and validation, its stamps, and its one write. Before it: now,
// span (B·T), and the key; store reads ep and qs, the stamps to keep.
//
// parse returns the TAT, the epoch and the queue stamp of a string value,
// and a description of it when it is not a state (then the other three are
// 0). stamp returns the next stamp, max(E, Q) + 1 or now, whichever is
// later. store writes "TAT" (no stamps), "TAT:E" (an epoch) or "TAT:E:Q"
// (a queue stamp), expiring at the later of TAT and E + B·T (for E ≥ 1),
// rounded up to whole ms, plus 1 ms (the expiry clock may be read, at the
// start of the script, before TIME is). maxwait is gcra.MaxWait in whole
// µs (a test holds the two together).
const stateLua = `
local maxwait = 1152921504606846
local function parse(v, now, span)
  local t, e, q = string.match(v, '^(%d+):(%d+):(%d+)$')
  if not t then t, e = string.match(v, '^(%d+):(%d+)$') end
  if not t then t = string.match(v, '^(%d+)$') end
  local why
  if not t or #t > 16 or (e and #e > 16) or (q and #q > 16) then why = ''
  else
    local tat, ep, qs = tonumber(t), tonumber(e or '0'), tonumber(q or '0')
    local reach = 2 * span
    if qs > 0 then reach = reach + maxwait end
    if tat >= 9007199254740992 or ep >= 9007199254740992 or qs >= 9007199254740992 then why = ''
    elseif tat - now > reach then
      if qs > 0 then
        why = string.format(': a TAT %.0fµs ahead, more than 2·B·T + the longest wait', tat - now)
      else
        why = string.format(': a TAT %.0fµs ahead, more than 2·B·T', tat - now)
      end
    elseif ep - now > 2 * span then
      why = string.format(': a give-back epoch %.0fµs ahead, more than 2·B·T', ep - now)
    elseif qs - now > 2 * span then
      why = string.format(': a queue stamp %.0fµs ahead, more than 2·B·T', qs - now)
    elseif tat - now > span and redis.call('PTTL', KEYS[1]) < 0 then
      why = ' with no expiry'
    else
      return tat, ep, qs, nil
    end
  end
  return 0, 0, 0, string.format('%q', string.sub(v, 1, 40)) .. why
end
local ep, qs = 0, 0
local function stamp()
  local s = math.max(ep, qs) + 1
  if now > s then s = now end
  return s
end
local function store(t)
  local val, idle = string.format('%.0f', t), t
  if ep > 0 or qs > 0 then val = val .. ':' .. string.format('%.0f', ep) end
  if qs > 0 then val = val .. ':' .. string.format('%.0f', qs) end
  if ep > 0 and ep + span > idle then idle = ep + span end
  redis.call('SET', KEYS[1], val, 'PX', math.ceil((idle - now) / 1000) + 1)
end
`

// decideSHA is the SHA-1 that EVALSHA names decideLua by.
var decideSHA = func() string {
	h := sha1.Sum([]byte(decideLua))
	return hex.EncodeToString(h[:])
}()

// An op is what one run of decideLua does (its ARGV[4]).
type op uint8

const (
	opPeek    op = iota // read the state only
	opTake              // admit and store
	opReceipt           // opTake, and reply the TAT stored (Take's receipt)
	opLease             // take as many as fit, up to n, and reply how many (lease.go)
	opReserve           // admit within a longest wait, and reply the wait (reserve.go)
)

// opArgs are the ops as the script's argument, boxed once here, so that the
// call does not allocate for them.
var opArgs = [...]any{opPeek: "0", opTake: "1", opReceipt: "2", opLease: "3", opReserve: "4"}

// maxDebtMicros bounds the debt the script may report (Redis TIME jumping
// back by decades), so that debt·1000 ns stays within what gcra accepts: a
// TAT of at most MaxNow + MaxSpan + MaxWait (2^62 + 2^60 ns, which no
// debt of a state reaches: at most 2·B·T ≤ 2^62 ns). It must not bind on
// a real debt: (1 << 52) / 1000 µs, 52 days, once reported a key of a
// 100-day span that owed 60 days as owing 52.
const maxDebtMicros = (int64(1)<<62 + int64(1)<<60) / 1000

// A taken is what a give-back of a GCRA admission needs (Take's receipt,
// a Reservation's Cancel): the TAT it stored and its time, in µs on Redis
// TIME, and the key's latest stamp, max(E, Q), when it was decided, its
// own queue stamp included (decideLua). The zero taken: nothing was stored.
type taken struct {
	tat, at, stamp uint64
}

// eval runs the script for n tokens on the Redis key rkey (through call:
// ctx is the caller's) and returns the debt before the call, in
// nanoseconds, whether the script admitted, and with opReceipt what a
// give-back of the admission needs (the zero taken if it stored nothing).
// nowMicros < 0 means "read TIME" (always, outside tests).
//
// An error is call's, or wraps ErrCorrupt: then the script repaired the
// key's state and the other results are its decision on the repair.
func (l *core) eval(ctx context.Context, rkey string, n int, o op, nowMicros int64) (debt int64, ok bool, tk taken, err error) {
	keys := []string{rkey}
	var args []any
	if nowMicros >= 0 {
		args = []any{l.argT, l.argSpan, n, opArgs[o], strconv.FormatInt(nowMicros, 10)}
	} else {
		args = []any{l.argT, l.argSpan, n, opArgs[o]}
	}
	reply, err := l.call(ctx, &decideScript, keys, args...)
	if err != nil {
		return 0, false, taken{}, err
	}
	var v int64
	switch r := reply.(type) {
	case int64: // the usual reply; with opReceipt, for a denial only
		v = r
	case []any:
		var vals [4]int64
		switch {
		case len(r) == 3 && ints(r[:2], vals[:2]) && vals[1] == 0:
			// A repair, which stores nothing: {v, 0, what the key held}.
			v, err = vals[0], corrupt(rkey, r[2])
		case o == opReceipt && len(r) == 4 && ints(r, vals[:]) && vals[1] > 0:
			// opReceipt's admission: {v, stored, now, stamp}.
			v = vals[0]
			tk = taken{tat: uint64(vals[1]), at: uint64(max(vals[2], 0)), stamp: uint64(max(vals[3], 0))}
		default:
			return 0, false, taken{}, rejectedReply(&decideScript, reply)
		}
	default:
		return 0, false, taken{}, rejectedReply(&decideScript, reply)
	}
	// With opReceipt, an admission carries its receipt and nothing else
	// does (n ≥ 1 here: the caller sends opPeek for n = 0).
	if o == opReceipt && (v&1 == 1) != (tk != taken{}) {
		return 0, false, taken{}, rejectedReply(&decideScript, reply)
	}
	return min(v>>1, maxDebtMicros) * 1000, v&1 == 1, tk, err
}

// refundLua gives back the n tokens of a GCRA admission (Take's, or a
// reservation's: Reservation.Cancel), atomically, on one key
// (cluster-safe), in µs on Redis TIME: gcra.Params.Refund, with the key's
// stamps (decideLua) for what gcra.Since says in process. ARGV: T, B·T, n,
// then the receipt: r (the TAT the admission stored), at (its time) and c
// (the key's latest stamp when it was decided); then 'c' for a Cancel (an
// empty argument otherwise); and in tests only an explicit now in µs. With
// now = max(TIME, at), due = max(r − B·T, at) (when its tokens were due),
// and the key's TAT, epoch E and queue stamp Q:
//
//	absent, not a state, nothing ahead:  nothing; reply 0
//	a Cancel with now > due (its tokens are due, and taken to be used): reply 0
//	TAT < due + n·T (a state that cannot hold it): reply 0
//	g = min(n·T, TAT − now, r − now, B·T − (TAT − r))   E ≤ c (gcra.Alone)
//	g = min(n·T, TAT − now, due + n·T − max(due, now))  Q ≤ c (gcra.NoneQueued)
//	g = min(n·T, TAT − now, due + n·T + T − TAT)        otherwise (gcra.Anything)
//	g ≤ 0: nothing; reply 0
//	TAT ← TAT − g; if TAT ≠ r or E > c (it may shift the admissions
//	after it): E ← the next stamp; reply 1
//
// A full bucket (TAT − g = now) with epoch 0 is deleted; any other state
// is stored as decideLua stores it.
//
// Why the stamps. Each script is atomic, so no give-back acts on a state
// that changed under it (the ABA that in process needs a lock). What
// remains is what gcra.Params.Refund is told of the decisions between the
// admission and its give-back: whether a give-back that shifted other
// admissions was made (then the admission's own TAT no longer bounds the
// admissions after it), and whether a reservation queued (then the
// admissions after it may be due after now). Every such event takes a new
// stamp, larger than every stamp before it (max(E, Q) + 1 or now), into E
// or Q; the admission's receipt holds max(E, Q) of its decision, which
// counts its own queue stamp: a shift since ⇔ E > c, a queued reservation
// since ⇔ Q > c, exactly as a stripe's counters say in process.
//
// Why a state created after the key vanished gets nothing: the stamps
// start again at 0 when the key is created anew, and a new state's stamps
// are not ordered with an old receipt's. It does not need them to be. A
// Cancel gives nothing once its tokens are due, and the key vanishes only
// once every admission it holds is due (expiry and deletion need the
// bucket full, TAT ≤ now, and TAT ≥ d + n·T for each admission due at d).
// A take's receipt has r ≤ at + B·T: if a shifting give-back came after
// the admission, it set E ≥ its now ≥ at, and the key lives until at least
// E + B·T ≥ r, a deletion included (only a key of epoch 0 is deleted); if
// none came, the state stayed at least r (an admission raises it, and a
// give-back that shifts nothing gives back at most what was stored after
// r) until the bucket was full, which deletion and expiry need. Either way
// a later state is seen at now ≥ r, when gcra.Alone's formula and
// gcra.NoneQueued's give nothing (r − now ≤ 0, due + n·T − now ≤ r − now).
// gcra.Anything's, due + n·T + T − TAT, gives nothing to a later state
// that holds an admission not given back: each is due at or after r, when
// that state was created, so the state is at least r + T ≥ due + n·T + T.
// To a later state that holds none, it gives at most what that state's own
// give-backs left above what it holds: no admission depends on it.
// Reset, and whatever else deletes a key early (DEL,
// FLUSHALL, eviction under maxmemory, a restart without persistence),
// already gives the whole bucket back; a receipt from before it may give
// back up to its n·T to a new state that holds at least n·T beyond the
// receipt's time.
//
// The caller checks 1 ≤ n ≤ B and that r, at and c are below 2^53, so
// every value is exact in Lua's doubles.
const refundLua = preludeLua + `
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local n, r, at, c = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_us(ARGV[8])
if now < at then now = at end
` + stateLua + `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if not v.err or string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then return v end
  return 0
end
if not v then return 0 end
local tat, bad
tat, ep, qs, bad = parse(v, now, span)
if bad then return 0 end
local cost = n * T
local due = math.max(r - span, at)
if ARGV[7] == 'c' and now > due then return 0 end -- due: taken to be used
if tat < due + cost then return 0 end -- a state that replaced it
local g = math.min(cost, tat - now)
local alone = ep <= c
if alone then
  g = math.min(g, r - now, span - (tat - r))
elseif qs <= c then
  g = math.min(g, due + cost - math.max(due, now))
else
  g = math.min(g, due + cost + T - tat)
end
if g <= 0 then return 0 end
local back = tat - g
if tat ~= r or not alone then ep = stamp() end
if back == now and ep == 0 then
  redis.call('DEL', KEYS[1])
else
  store(back)
end
return 1
`

// refundSHA is the SHA-1 that EVALSHA names refundLua by.
var refundSHA = func() string {
	h := sha1.Sum([]byte(refundLua))
	return hex.EncodeToString(h[:])
}()

// maxReceipt bounds the values of the receipts Take returns: stored TATs,
// times and epochs are whole µs below 2^53 (see decideLua).
const maxReceipt = uint64(1) << 53

// evalRefund runs refundLua (through call: ctx is the caller's) and reports
// whether it gave anything back: a Take's give-back, or with cancel a
// reservation's, which gives nothing once its tokens are due. nowMicros < 0
// means "read TIME" (always, outside tests).
func (l *core) evalRefund(ctx context.Context, rkey string, n int, tk taken, cancel bool, nowMicros int64) (bool, error) {
	keys := []string{rkey}
	mode := ""
	if cancel {
		mode = "c"
	}
	args := []any{l.argT, l.argSpan, n, strconv.FormatUint(tk.tat, 10), strconv.FormatUint(tk.at, 10), strconv.FormatUint(tk.stamp, 10), mode}
	if nowMicros >= 0 {
		args = append(args, strconv.FormatInt(nowMicros, 10))
	}
	reply, err := l.call(ctx, &refundScript, keys, args...)
	if err != nil {
		return false, err
	}
	v, isInt := reply.(int64)
	if !isInt {
		return false, rejectedReply(&refundScript, reply)
	}
	return v == 1, nil
}
