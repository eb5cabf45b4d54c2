package redisgcra

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
// ARGV[4] is the op: '0' peeks, '1' takes, '2' takes and reports what it
// stored, '3' leases: it takes k = min(n, ⌊(B·T − debt)/T⌋) tokens, as many
// as fit up to n, if k ≥ ARGV[6] (the request the lease is for; else it
// takes nothing), and replies {debt·2 + admitted, k or 0}, so that a nearly
// empty bucket still leases what it has (lease.go). The
// quotient of doubles may round up to the next integer; the script then
// steps k back, so that debt + k·T ≤ B·T holds exactly. Otherwise the
// script returns debt·2 + admitted, one integer, from which the caller
// rebuilds the whole gcra.Decision (every field depends on TAT only through
// debt); with op '2', the pair {debt·2 + admitted, stored TAT or 0}, the
// TAT being Take's receipt. A denial and a peek write nothing. Every value
// is a whole number of microseconds below 2^53, so the doubles of Lua are
// exact (see the package doc); string.format('%.0f') writes them exactly,
// as an integer, and Redis converts a returned number to an integer reply
// exactly.
//
// The stored value is validated before use (ErrCorrupt): a state is a
// string of 1 to 16 decimal digits below 2^53, and a TAT more than B·T
// ahead of now has an expiry (the states this script writes always do;
// one that is that far ahead without one can only deny for ever). Anything
// else (another type, caught by pcall; "inf", "1e19", "nan", "0x10", which
// tonumber would turn into a non-integer, or a number far outside any TAT)
// is replaced, in this call, by the empty bucket TAT = now + B·T with the
// usual expiry, and the decision is made on that; the reply is then the
// triple {debt·2 + admitted, stored or 0, what the key held} whatever the
// op. Other errors of GET (NOPERM) are returned as they are.
//
// ARGV[5] is set only in tests: an explicit now in µs, so that the decision
// vectors can run on a timeline. Production calls pass four arguments (or
// an empty ARGV[5] for op '3') and the script reads TIME.
const decideLua = `
if redis.replicate_commands then redis.replicate_commands() end
local now
if ARGV[5] and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local v = redis.pcall('GET', KEYS[1])
local tat, bad = 0, nil
if type(v) == 'table' then
  if not v.err or string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then return v end
  bad = 'a value of type ' .. redis.call('TYPE', KEYS[1]).ok
elseif v then
  local digits = #v >= 1 and #v <= 16 and not string.find(v, '%D')
  if digits then tat = tonumber(v) end
  if not digits or tat >= 9007199254740992 then
    tat, bad = 0, string.format('%q', string.sub(v, 1, 40))
  elseif tat - now > span and redis.call('PTTL', KEYS[1]) < 0 then
    bad = v .. ' with no expiry'
  end
end
if bad then
  tat = now + span
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil(span / 1000) + 1)
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
    local ahead = debt + k * T
    stored = k
    redis.call('SET', KEYS[1], string.format('%.0f', now + ahead), 'PX', math.ceil(ahead / 1000) + 1)
  end
elseif n >= 1 and debt + n * T <= span then
  ok = 1
  if ARGV[4] ~= '0' then
    local ahead = debt + n * T
    stored = now + ahead
    redis.call('SET', KEYS[1], string.format('%.0f', stored), 'PX', math.ceil(ahead / 1000) + 1)
  end
end
if bad then return {debt * 2 + ok, stored, bad} end
if ARGV[4] == '2' or ARGV[4] == '3' then return {debt * 2 + ok, stored} end
return debt * 2 + ok
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
// back by decades), so that debt·1000 ns stays within what gcra accepts.
const maxDebtMicros = int64(1) << 52 / 1000

// eval runs the script for n tokens on the Redis key rkey (through call:
// ctx is the caller's) and returns the debt before the call, in
// nanoseconds, whether the script admitted, and with opReceipt the TAT it
// stored in µs (0 if it stored nothing). nowMicros < 0 means "read TIME"
// (always, outside tests).
//
// An error is call's, or wraps ErrCorrupt: then the script repaired the
// key's state and the other results are its decision on the repair.
func (l *Limiter) eval(ctx context.Context, rkey string, n int, o op, nowMicros int64) (debt int64, ok bool, stored uint64, err error) {
	keys := []string{rkey}
	var args []any
	if nowMicros >= 0 {
		args = []any{l.argT, l.argSpan, n, opArgs[o], strconv.FormatInt(nowMicros, 10)}
	} else {
		args = []any{l.argT, l.argSpan, n, opArgs[o]}
	}
	reply, err := l.call(ctx, &decideScript, keys, args...)
	if err != nil {
		return 0, false, 0, err
	}
	var v int64
	switch r := reply.(type) {
	case int64: // the usual reply, but with opReceipt
		if o == opReceipt {
			return 0, false, 0, rejectedReply(&decideScript, reply)
		}
		v = r
	case []any: // {v, stored} with opReceipt; {v, stored, what} after a repair
		var s int64
		var okv, oks bool
		if len(r) == 2 || len(r) == 3 {
			v, okv = r[0].(int64)
			s, oks = r[1].(int64)
		}
		if !okv || !oks || (len(r) == 2 && o != opReceipt) {
			return 0, false, 0, rejectedReply(&decideScript, reply)
		}
		stored = uint64(max(s, 0))
		if len(r) == 3 {
			err = corrupt(rkey, r[2])
		}
	default:
		return 0, false, 0, rejectedReply(&decideScript, reply)
	}
	return min(v>>1, maxDebtMicros) * 1000, v&1 == 1, stored, err
}

// refundLua gives back the n·T of the admission whose stored TAT was the
// receipt, atomically, on one key (cluster-safe), in µs on Redis TIME:
//
//	TAT ≠ receipt (absent, or anything admitted since): nothing; reply 0
//	back = max(receipt − n·T, now)
//	back ≥ TAT (the admission's tokens are already due): nothing; reply 0
//	back = now: the bucket is full: DEL; reply 1
//	else: TAT ← back, expiring as decideLua's (⌈(back − now)/1 ms⌉ + 1 ms); reply 1
//
// It is gcra.Params.Refund. With the n that the admission took, TAT never
// moves below now nor below the TAT the admission started from (receipt −
// n·T is that TAT, or the admission's now), so a refund never creates
// quota. The caller checks 1 ≤ n ≤ B and 0 < receipt < 2^53, so every value
// is exact in Lua's doubles. ARGV: T in µs, n, receipt, and in tests only an explicit
// now in µs.
const refundLua = `
if redis.replicate_commands then redis.replicate_commands() end
local tat = tonumber(redis.call('GET', KEYS[1]))
local receipt = tonumber(ARGV[3])
if tat ~= receipt then return 0 end
local now
if ARGV[4] then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local back = receipt - tonumber(ARGV[2]) * tonumber(ARGV[1])
if back < now then back = now end
if back >= tat then return 0 end
if back == now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f', back), 'PX', math.ceil((back - now) / 1000) + 1)
end
return 1
`

// refundSHA is the SHA-1 that EVALSHA names refundLua by.
var refundSHA = func() string {
	h := sha1.Sum([]byte(refundLua))
	return hex.EncodeToString(h[:])
}()

// maxReceipt bounds the receipts Take returns: stored TATs are whole µs
// below 2^53 (see decideLua).
const maxReceipt = uint64(1) << 53

// evalRefund runs refundLua (through call: ctx is the caller's) and reports
// whether it gave anything back. nowMicros < 0 means "read TIME" (always,
// outside tests).
func (l *Limiter) evalRefund(ctx context.Context, rkey string, n int, receipt uint64, nowMicros int64) (bool, error) {
	keys := []string{rkey}
	var args []any
	if nowMicros >= 0 {
		args = []any{l.argT, n, strconv.FormatUint(receipt, 10), strconv.FormatInt(nowMicros, 10)}
	} else {
		args = []any{l.argT, n, strconv.FormatUint(receipt, 10)}
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
