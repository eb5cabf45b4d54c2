package redislimit

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
)

// resetLua deletes every key it is given: a limiter's whole state for one
// user key (one Redis key for GCRA). It replies how many existed.
const resetLua = `return redis.call('DEL', unpack(KEYS))`

var resetScript = func() script {
	h := sha1.Sum([]byte(resetLua))
	return script{resetLua, hex.EncodeToString(h[:])}
}()

// Reset removes key's state from Redis, for every process: the bucket is
// full again, as for a key never seen. It is one script call (DEL) on key
// alone (cluster-safe), and it takes no Outage policy: its error is Take's
// (an outage wraps ErrUnavailable, a rejection ErrRejected, a caller who
// gave up ctx.Err()), and then nothing was removed. Unlimited and DenyAll
// keep no state: Reset makes no call and returns nil.
//
// First Redis forgets key, then this process's over-limit cache does.
// Another process's cache, or a denial in flight here when Reset ran (read
// from Redis before the DEL, recorded after it), may deny key for up to
// the cache's max age (WithOverLimitCacheMaxAge, 1s by default) after the
// reset.
func (l *Limiter[K]) Reset(ctx context.Context, key K) error {
	if l.static {
		return nil
	}
	_, err := l.call(ctx, &resetScript, []string{l.Key(key)})
	if err != nil {
		l.observeErr(err)
		return err
	}
	if l.cache != nil {
		l.cache.forget(key)
	}
	return nil
}
