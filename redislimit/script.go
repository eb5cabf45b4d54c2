package redislimit

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// decideLua is the whole decision, run atomically by Redis. It is gcra's
// Reserve with maxWait 0, in microseconds, on Redis TIME:
//
//	debt  = max(TAT − now, 0)           (TAT absent: 0, a full bucket)
//	admit ⇔ n ≥ 1 and debt + n·T ≤ B·T  (n ≤ B is checked by the caller)
//	admit and store: TAT ← now + debt + n·T, expiring once the bucket is full
//
// ARGV[4] is the op: '0' peeks, '1' takes, '2' takes and reports what a
// give-back of the admission needs, '3' leases: it takes k = min(n,
// ⌊(B·T − debt)/T⌋) tokens, as many as fit up to n, if k ≥ ARGV[6] (the
// request the lease is for; else it takes nothing), and replies
// {debt·2 + admitted, k or 0}, so that a nearly empty bucket still leases
// what it has (lease.go). The quotient of doubles may round up to the next
// integer; the script then steps k back, so that debt + k·T ≤ B·T holds
// exactly. Otherwise the script returns debt·2 + admitted, one integer, from
// which the caller rebuilds the whole gcra.Decision (every field depends on
// TAT only through debt); with op '2', when it stored, {debt·2 + admitted,
// stored TAT, now, E}: Take's receipt (refundLua), and otherwise the reply
// of op '1', so that a denial costs Take what it costs Allow (one integer
// to read). A denial and a peek write nothing.
// Every value is a whole number of microseconds below 2^53, so the doubles
// of Lua are exact (see the package doc); string.format('%.0f') writes them
// exactly, as an integer, and Redis converts a returned number to an
// integer reply exactly.
//
// # The stored value
//
// "TAT", or "TAT:E" with E ≥ 1, both decimal µs: E is the key's give-back
// epoch (refundLua), 0 when absent. The values written before the epoch
// existed are the first form, and read as epoch 0: an upgrade changes no
// decision and no give-back. Only a give-back that shifted other admissions
// writes the second form, and every write keeps it: an admission stores
// "TAT:E" with the E it read. A key with an epoch expires no sooner than
// E + B·T (refundLua says why); one without, once the bucket is full.
//
// The value is validated before use (ErrCorrupt): TAT and E are 1 to 16
// decimal digits below 2^53; TAT is at most 2·B·T ahead of now, and at most
// B·T ahead unless the key has an expiry; E at most 2·B·T ahead. A decision
// stores TAT ≤ now + B·T (the lease's too), and E ≤ now (refundLua): the
// second B·T lets Redis TIME step back by up to B·T (a failover) without a
// repair. Anything else (another type, caught by pcall; "inf", "1e19",
// "nan", "0x10", which tonumber would turn into a non-integer; a number far
// outside any TAT; a TAT a year ahead with a year's expiry, which would lock
// the key out for that year) is replaced, in this call, by the empty bucket
// TAT = now + B·T with the usual expiry and no epoch, and the decision is
// made on that; the reply is then {debt·2 + admitted, 0, what the key held}
// whatever the op: a repaired state denies every n ≥ 1 (and the caller
// sends op '0' for n = 0), so nothing is stored. Other errors of GET
// (NOPERM) are returned as they are.
//
// ARGV[5] is set only in tests: an explicit now in µs, so that the decision
// vectors can run on a timeline. Production calls pass four arguments (or
// an empty ARGV[5] for op '3') and the script reads TIME.
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
  tat, ep, bad = parse(v, now, span)
end
if bad then
  tat = now + span
  store(tat)
end
local debt = 0
if tat > now then debt = tat - now end
local ok = 0
local stored = 0
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
if ARGV[4] == '2' and stored > 0 then return {debt * 2 + ok, stored, now, ep} end
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
// parsing and validation, and its one write. Before it: now, span (B·T),
// and the key; store reads ep, the epoch to keep.
//
// parse returns the TAT and the epoch of a string value, and a description
// of it when it is not a state (then the other two are 0). store writes
// "TAT" (epoch 0) or "TAT:E", expiring at the later of TAT and E + B·T,
// rounded up to whole ms, plus 1 ms (the expiry clock may be read, at the
// start of the script, before TIME is).
const stateLua = `
local function parse(v, now, span)
  local t, e = string.match(v, '^(%d+):(%d+)$')
  if not t then t = string.match(v, '^(%d+)$') end
  local why
  if not t or #t > 16 or (e and #e > 16) then why = ''
  else
    local tat, ep = tonumber(t), tonumber(e or '0')
    if tat >= 9007199254740992 or ep >= 9007199254740992 then why = ''
    elseif tat - now > 2 * span then
      why = string.format(': a TAT %.0fµs ahead, more than 2·B·T', tat - now)
    elseif ep - now > 2 * span then
      why = string.format(': a give-back epoch %.0fµs ahead, more than 2·B·T', ep - now)
    elseif tat - now > span and redis.call('PTTL', KEYS[1]) < 0 then
      why = ' with no expiry'
    else
      return tat, ep, nil
    end
  end
  return 0, 0, string.format('%q', string.sub(v, 1, 40)) .. why
end
local ep = 0
local function store(t)
  local val, idle = string.format('%.0f', t), t
  if ep > 0 then
    val = val .. ':' .. string.format('%.0f', ep)
    if ep + span > idle then idle = ep + span end
  end
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
)

// opArgs are the ops as the script's argument, boxed once here, so that the
// call does not allocate for them.
var opArgs = [...]any{opPeek: "0", opTake: "1", opReceipt: "2", opLease: "3"}

// maxDebtMicros bounds the debt the script may report (Redis TIME jumping
// back by decades), so that debt·1000 ns stays within what gcra accepts: a
// TAT of at most MaxNow + MaxSpan + MaxWait (2^62 + 2^60 ns, which no
// debt of a state reaches: at most 2·B·T ≤ 2^62 ns). It must not bind on
// a real debt: (1 << 52) / 1000 µs, 52 days, once reported a key of a
// 100-day span that owed 60 days as owing 52.
const maxDebtMicros = (int64(1)<<62 + int64(1)<<60) / 1000

// A taken is what Take's receipt carries of a GCRA admission: the TAT it
// stored and its time, in µs on Redis TIME, and the key's give-back epoch
// when it was decided. The zero taken: nothing was stored.
type taken struct {
	tat, at, epoch uint64
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
			// opReceipt's admission: {v, stored, now, epoch}.
			v = vals[0]
			tk = taken{tat: uint64(vals[1]), at: uint64(max(vals[2], 0)), epoch: uint64(max(vals[3], 0))}
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

// refundLua gives back the n tokens of a GCRA admission, atomically, on one
// key (cluster-safe), in µs on Redis TIME: gcra.Params.Refund, with the
// key's give-back epoch for its alone. ARGV: T, B·T, n, then the receipt:
// r (the TAT the admission stored), at (its time) and e (the epoch it
// read), and in tests only an explicit now in µs. With now = max(TIME, at)
// and the key's TAT and epoch E:
//
//	absent, not a state, nothing ahead:  nothing; reply 0
//	TAT < max(r − B·T, at) + n·T (a state that cannot hold it): reply 0
//	g = min(n·T, r − now, TAT − now, B·T − (TAT − r))   if E = e (alone)
//	g = min(at + n·T − now, TAT − now)                  otherwise
//	g ≤ 0: nothing; reply 0
//	TAT ← TAT − g; if TAT ≠ r or E ≠ e (it may shift the admissions
//	after it): E ← max(E + 1, now); reply 1
//
// Redis holds no reservation due later than the time it was decided at,
// so "otherwise" is gcra.NoneQueued, and B·T − (TAT − r) binds only when
// the give-back's now is earlier than a decision made since (a caller
// stamping its own times): it keeps the formula gcra's.
//
// A full bucket (TAT − g = now) with epoch 0 is deleted; any other state
// is stored as decideLua stores it.
//
// Why the epoch. Each script is atomic, so no give-back acts on a state
// that changed under it (the ABA that in process needs a lock). What
// remains is gcra.Params.Refund's alone: no give-back that shifted other
// admissions was made on the state since the admission. E changes with
// every such give-back, and only then (max(E + 1, now) grows), and the
// admission's receipt holds the E it was decided with: alone ⇔ E = e.
//
// Why a state created after the key vanished gets nothing: an epoch starts
// again at 0 when the key is created anew, so E = e alone would not tell
// the states apart. It does not need to. If a shifting give-back came after
// the admission, it set E ≥ its now ≥ at, and the key lives until at least
// E + B·T ≥ at + B·T ≥ r (the admission stored at most B·T ahead), a
// deletion included (only a key of epoch 0 is deleted); if none came, the
// state stayed at least r (an admission raises it, and a give-back that
// shifts nothing gives back at most what was stored after r) until the
// bucket was full, which deletion and expiry need. Either way a later
// state is seen at now ≥ r, when both formulas give nothing (r ≥ at + n·T).
// Reset, and whatever else deletes a key early (DEL, FLUSHALL, eviction
// under maxmemory, a restart without persistence), already gives the whole
// bucket back; a receipt from before it may give back up to its n·T to a
// new state that holds at least n·T beyond the receipt's time.
//
// The caller checks 1 ≤ n ≤ B and that r, at and e are below 2^53, so
// every value is exact in Lua's doubles.
const refundLua = preludeLua + `
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local n, r, at, e = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_us(ARGV[7])
if now < at then now = at end
` + stateLua + `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if not v.err or string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then return v end
  return 0
end
if not v then return 0 end
local tat, bad
tat, ep, bad = parse(v, now, span)
if bad then return 0 end
local g = tat - now
if tat < math.max(r - span, at) + n * T then return 0 end -- a state that replaced it
local alone = ep == e
if alone then
  g = math.min(n * T, r - now, g, span - (tat - r))
else
  g = math.min(at + n * T - now, g)
end
if g <= 0 then return 0 end
local back = tat - g
if tat ~= r or not alone then ep = math.max(ep + 1, now) end
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
// whether it gave anything back. nowMicros < 0 means "read TIME" (always,
// outside tests).
func (l *core) evalRefund(ctx context.Context, rkey string, n int, tk taken, nowMicros int64) (bool, error) {
	keys := []string{rkey}
	args := []any{l.argT, l.argSpan, n, strconv.FormatUint(tk.tat, 10), strconv.FormatUint(tk.at, 10), strconv.FormatUint(tk.epoch, 10)}
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
