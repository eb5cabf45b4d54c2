package redislimit

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// holdLua pushes a GCRA key's TAT to now + hold + (B−1)·T, if it is not
// that far ahead already: no request is admitted for hold µs (ARGV[3]) on
// Redis TIME (ARGV[4] in tests), and then the bucket refills from empty.
// The hold stamps the key's queue, as a reservation that queued does, so
// that no give-back of an admission or a reservation before it (refundLua)
// can undo it. A state it cannot read (another type, a corrupt value) is
// replaced by the hold. It replies 1 if it pushed the state, 0 if the key
// was held that long already.
const holdLua = preludeLua + `
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local now = now_us(ARGV[4])
` + stateLua + `
local v = redis.pcall('GET', KEYS[1])
local tat = 0
if type(v) == 'table' then
  if not v.err or string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then return v end
elseif v then
  local bad
  tat, ep, qs, bad = parse(v, now, span)
  if bad then tat, ep, qs = 0, 0, 0 end
end
local target = now + tonumber(ARGV[3]) + span - T
if target <= tat then return 0 end
qs = stamp()
store(target)
return 1
`

var holdScript = func() script {
	h := sha1.Sum([]byte(holdLua))
	return script{holdLua, hex.EncodeToString(h[:])}
}()

// Hold makes key's state admit nothing for d from now, for every process
// that shares it: it is how a provider's "wait" (a 429's Retry-After, that
// httplimit's Transport hears) reaches the fleet. One process makes the
// call; the others read the hold in the state their next Take, Reserve or
// Wait reads, with no call of their own, and their reservations queue
// behind it. It pushes the key's TAT to Redis TIME + d + (B−1)·T (d
// rounded up to whole µs): after d, the first token comes back and the
// bucket refills from empty (stricter than a provider that gives its whole
// quota back at once, never looser). A key held as long already is left
// as it is. A reservation made before the hold keeps the time it was
// promised, and no give-back of an admission made before it (Refund,
// Reservation.Cancel) undoes it.
//
// It is one script call, and takes no Outage policy: its error is Take's
// (an outage wraps ErrUnavailable, a rejection ErrRejected, a caller who
// gave up ctx.Err()), and then nothing was held. d ≤ 0, Unlimited and
// DenyAll make no call. It holds New's GCRA limits only: NewRule's
// windows fail with errors.ErrUnsupported. d is at most gcra.MaxWait.
func (l *Limiter[K]) Hold(ctx context.Context, key K, d time.Duration) error {
	return l.hold(ctx, key, d, -1)
}

// hold is Hold at Redis TIME (nowMicros < 0) or at an explicit time (tests).
func (l *Limiter[K]) hold(ctx context.Context, key K, d time.Duration, nowMicros int64) error {
	if l.rule != nil {
		return fmt.Errorf("redislimit: Hold holds a GCRA limit, not %v: %w", *l.rule, errors.ErrUnsupported)
	}
	if d <= 0 || l.static {
		return nil
	}
	us := (min(d, gcra.MaxWait) + time.Microsecond - 1) / time.Microsecond
	args := []any{l.argT, l.argSpan, strconv.FormatInt(int64(us), 10)}
	if nowMicros >= 0 {
		args = append(args, strconv.FormatInt(nowMicros, 10))
	}
	reply, err := l.call(ctx, &holdScript, []string{l.Key(key)}, args...)
	if err != nil {
		l.observeErr(err)
		return err
	}
	if _, ok := reply.(int64); !ok {
		err := rejectedReply(&holdScript, reply)
		l.observeErr(err)
		return err
	}
	return nil
}
