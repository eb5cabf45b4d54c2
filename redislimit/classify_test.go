package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/atomiclimit/atomiclimit"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// replyErr is an error reply from Redis, as go-redis types them.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// fakeServer is a redis.Scripter whose every script call returns err (nil:
// reply), or what next returns when set. It counts the calls.
type fakeServer struct {
	noServer
	err   error
	reply any
	next  func(ctx context.Context) (any, error)
	n     atomic.Int64
}

func (s *fakeServer) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	s.n.Add(1)
	reply, err := s.reply, s.err
	if s.next != nil {
		reply, err = s.next(ctx)
	}
	cmd := redis.NewCmd(ctx)
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(reply)
	}
	return cmd
}

func (s *fakeServer) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return s.EvalSha(ctx, "", keys, args...)
}

// TestClassification: which errors are outages (the Outage policy
// decides, ErrUnavailable) and which are rejections (ErrRejected: never
// fail-open), under FailOpen, where the difference shows.
func TestClassification(t *testing.T) {
	outages := []error{
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET},
		io.EOF,
		io.ErrUnexpectedEOF,
		redis.ErrClosed,
		redis.ErrPoolTimeout,
		replyErr("LOADING Redis is loading the dataset in memory"),
		replyErr("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
		replyErr("TRYAGAIN Multiple keys request during rehashing of slot"),
		replyErr("CLUSTERDOWN The cluster is down"),
		replyErr("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
		replyErr("NOREPLICAS Not enough good replicas to write."),
		replyErr("OOM command not allowed when used memory > 'maxmemory'."),
		replyErr("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."),
		replyErr("ERR max number of clients reached"),
	}
	rejections := []error{
		replyErr("READONLY You can't write against a read only replica."),
		replyErr("NOPERM this user has no permissions to run the 'evalsha' command"),
		replyErr("NOAUTH Authentication required."),
		replyErr("WRONGPASS invalid username-password pair or user is disabled."),
		replyErr("ERR unknown command 'EVALSHA', with args beginning with: "),
		replyErr("MOVED 3999 127.0.0.1:6381"),
		replyErr("ASK 3999 127.0.0.1:6381"),
		replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"),
		replyErr("ERR user_script:1: Script attempted to access nonexistent global variable"),
		replyErr("BUSYKEY Target key name already exists."),
	}
	ctx := context.Background()
	check := func(t *testing.T, err error, outage bool) {
		srv := &fakeServer{err: err}
		l, e := redislimit.New(srv, gcra.Every(time.Hour), 2, redislimit.WithOutage(redislimit.FailOpen))
		require.NoError(t, e)
		r := l.TakeResult(ctx, "k", 1)
		assert.ErrorIs(t, r.Err, err, "the cause is wrapped")
		if outage {
			assert.Equal(t, redislimit.SourceFailOpen, r.Source)
			assert.True(t, r.Allowed)
			assert.ErrorIs(t, r.Err, redislimit.ErrUnavailable)
			assert.NotErrorIs(t, r.Err, redislimit.ErrRejected)
		} else {
			assert.Equal(t, redislimit.SourceFailClosed, r.Source)
			assert.False(t, r.Allowed, "a rejection is never fail-open")
			assert.ErrorIs(t, r.Err, redislimit.ErrRejected)
			assert.NotErrorIs(t, r.Err, redislimit.ErrUnavailable)
			assert.True(t, strings.HasPrefix(r.Err.Error(), "redislimit: "), r.Err.Error())
		}
		_, err = l.Refund(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{1234}))
		assert.Equal(t, outage, errors.Is(err, redislimit.ErrUnavailable))
		assert.Equal(t, !outage, errors.Is(err, redislimit.ErrRejected))
		err = l.Reset(ctx, "k")
		assert.Equal(t, outage, errors.Is(err, redislimit.ErrUnavailable))
		assert.Equal(t, !outage, errors.Is(err, redislimit.ErrRejected))
	}
	for _, err := range outages {
		t.Run("outage="+err.Error(), func(t *testing.T) { check(t, err, true) })
	}
	for _, err := range rejections {
		t.Run("rejected="+err.Error(), func(t *testing.T) { check(t, err, false) })
	}
}

// rejectedSource is the Source of p's decision on a rejection: FailOpen's
// is FailClosed's.
func rejectedSource(p policy) redislimit.Source {
	if p.source == redislimit.SourceFailOpen {
		return redislimit.SourceFailClosed
	}
	return p.source
}

// TestRejectedDecisions: under each policy, a rejection is denied as
// FailClosed denies, or decided by FallbackTo's limiter; FailOpen never
// admits.
func TestRejectedDecisions(t *testing.T) {
	ctx := context.Background()
	srv := &fakeServer{err: replyErr("NOPERM this user has no permissions to run the 'evalsha' command")}
	for _, pname := range policyNames {
		p := newPolicy(t, pname)
		l, err := redislimit.New(srv, gcra.Per(30, time.Minute), 2, redislimit.WithOutage(p.outage))
		require.NoError(t, err)
		r := l.TakeResult(ctx, "k", 1)
		assert.ErrorIs(t, r.Err, redislimit.ErrRejected)
		switch pname {
		case "fallback":
			assert.Equal(t, redislimit.SourceFallback, r.Source)
			assert.ErrorIs(t, r.Err, atomiclimit.ErrFallback)
			assert.True(t, r.Allowed)
			assert.Equal(t, 1, peekLocal(p.local, "k", 0).Remaining, "the fallback decided, and was charged")
			peek := l.PeekResult(ctx, "k", 2)
			assert.Equal(t, redislimit.SourceFallback, peek.Source)
			assert.False(t, peek.Allowed, "the fallback's state: one token left")
			assert.Equal(t, 1, peekLocal(p.local, "k", 0).Remaining, "a peek takes nothing")
		default:
			assert.Equal(t, redislimit.SourceFailClosed, r.Source, pname)
			assert.NotErrorIs(t, r.Err, atomiclimit.ErrFallback, pname)
			assert.Equal(t, gcra.Decision{RetryAfter: time.Second}, r.Decision, "%s: FailClosed's denial", pname)
			assert.Equal(t, gcra.Never, decision(l, ctx, "k", 3).RetryAfter, pname)
		}
	}
}

// TestReplyOfTheWrongShape: a reply the script never gives (another
// script at the SHA, a proxy) is a rejection, not a decision; Take's
// denial is one integer, as Allow's.
func TestReplyOfTheWrongShape(t *testing.T) {
	ctx := context.Background()
	for _, reply := range []any{
		"OK", []any{int64(1)}, []any{"a", "b"},
		int64(3), // an admission without its receipt
		[]any{int64(3), int64(0), int64(5), int64(0)}, // the same
		[]any{int64(2), int64(7), int64(5), int64(0)}, // a receipt for a denial
		[]any{int64(3), int64(7), "garbage"},          // a repair that stored
	} {
		srv := &fakeServer{reply: reply}
		l, err := redislimit.New(srv, gcra.Every(time.Hour), 2, redislimit.WithOutage(redislimit.FailOpen))
		require.NoError(t, err)
		_, _, err = l.Take(ctx, "k", 1)
		assert.ErrorIs(t, err, redislimit.ErrRejected, "%v", reply)
	}
	srv := &fakeServer{reply: int64(2 * 3600e6)} // denied, a debt of an hour
	l, err := redislimit.New(srv, gcra.Every(time.Hour), 2)
	require.NoError(t, err)
	d, r, err := l.Take(ctx, "k", 2)
	require.NoError(t, err)
	assert.Equal(t, gcra.Decision{Remaining: 1, RetryAfter: time.Hour, ResetAfter: time.Hour}, d)
	assert.Zero(t, r)
}

// TestReadOnlyReplica: a client of a replica (a misconfiguration, or a
// master demoted by a failover until the client reconnects) gets READONLY
// for every admission: a rejection under every policy. Denials and peeks,
// which write nothing, are still Redis's (from the replica's copy). Once
// the replica is promoted, admissions are Redis's again: nothing was
// written meanwhile, so no key carries a trace.
func TestReadOnlyReplica(t *testing.T) {
	master := startServer(t)
	replica := startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.port))
	ctx := context.Background()
	rc := replica.client(t)
	waitFor(t, "the replica to sync", func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	for _, pname := range policyNames {
		t.Run("policy="+pname, func(t *testing.T) {
			p := newPolicy(t, pname)
			h := newRecHook()
			l, err := redislimit.New(rc, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)),
				redislimit.WithOutage(p.outage), redislimit.WithBreaker(1, time.Hour), redislimit.WithHook("p", h.hook()))
			require.NoError(t, err)
			for range 2 {
				r := l.TakeResult(ctx, "k", 1)
				require.ErrorIs(t, r.Err, redislimit.ErrRejected)
				assert.True(t, redis.IsReadOnlyError(r.Err), "the READONLY reply is wrapped: %v", r.Err)
				assert.NotErrorIs(t, r.Err, redislimit.ErrCircuitOpen, "a rejection does not open the breaker")
				assert.Equal(t, p.name == "fallback", r.Allowed)
			}
			assert.Equal(t, 2, h.count(rejectedSource(p), "error"))
			r := l.PeekResult(ctx, "k", 1)
			assert.Equal(t, redislimit.SourceRedis, r.Source, "a peek writes nothing: the replica answers")
			assert.NoError(t, r.Err)
		})
	}
}

// TestPromotedReplicaDecides: the rejection ends with its cause.
func TestPromotedReplicaDecides(t *testing.T) {
	master := startServer(t)
	replica := startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.port))
	ctx := context.Background()
	rc := replica.client(t)
	l, err := redislimit.New(rc, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOutage(redislimit.FailOpen))
	require.NoError(t, err)
	waitFor(t, "READONLY from the replica", func() bool {
		return errors.Is(l.TakeResult(ctx, "k", 1).Err, redislimit.ErrRejected)
	})
	require.NoError(t, rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
	r := l.TakeResult(ctx, "k", 1)
	assert.Equal(t, redislimit.SourceRedis, r.Source)
	assert.True(t, r.Allowed, "the key was not locked out")
	assert.False(t, allowN(l, ctx, "k", 1), "and is limited")
}

// TestACL: a user without EVALSHA, or without the limiter's keys, is
// rejected (NOPERM) under every policy; granting the permission ends it.
func TestACL(t *testing.T) {
	s := startServer(t)
	admin := s.client(t)
	ctx := context.Background()
	users := []struct{ name, rules string }{
		{"no-evalsha", "+@all -evalsha ~*"},
		{"no-eval", "+@all -evalsha -eval ~*"},
		{"no-keys", "+@all ~other:*"},
	}
	for _, u := range users {
		for _, pname := range policyNames {
			t.Run("user="+u.name+"/policy="+pname, func(t *testing.T) {
				args := []any{"ACL", "SETUSER", u.name, "reset", "on", ">pw"}
				for _, r := range strings.Fields(u.rules) {
					args = append(args, r)
				}
				require.NoError(t, admin.Do(ctx, args...).Err())
				c := s.client(t, func(o *redis.Options) { o.Username, o.Password = u.name, "pw" })
				p := newPolicy(t, pname)
				l, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)),
					redislimit.WithOutage(p.outage), redislimit.WithBreaker(1, time.Hour))
				require.NoError(t, err)
				for range 2 {
					r := l.TakeResult(ctx, "k", 1)
					require.ErrorIs(t, r.Err, redislimit.ErrRejected)
					assert.Contains(t, r.Err.Error(), "NOPERM")
					assert.Equal(t, rejectedSource(p), r.Source)
					assert.Equal(t, p.name == "fallback", r.Allowed, "never fail-open")
				}
				require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", u.name, "+@all", "allkeys").Err())
				r := l.TakeResult(ctx, "k", 1)
				assert.Equal(t, redislimit.SourceRedis, r.Source, "%v", r.Err)
				assert.True(t, r.Allowed, "not locked out once the ACL is fixed")
			})
		}
	}
}

// TestBusyIsAnOutage: a server running a slow script answers BUSY to
// everyone else: an outage (FailOpen admits), on a real server.
func TestBusyIsAnOutage(t *testing.T) {
	s := startServer(t, "--busy-reply-threshold", "10")
	ctx := context.Background()
	blocker := s.client(t, func(o *redis.Options) { o.ReadTimeout = -1 })
	done := make(chan error, 1)
	go func() { done <- blocker.Eval(ctx, "while true do end", nil).Err() }()
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 1, redislimit.WithOutage(redislimit.FailOpen))
	require.NoError(t, err)
	var r redislimit.Result
	waitFor(t, "BUSY", func() bool {
		r = l.TakeResult(ctx, "k", 1)
		return r.Err != nil && strings.Contains(r.Err.Error(), "BUSY")
	})
	assert.ErrorIs(t, r.Err, redislimit.ErrUnavailable)
	assert.Equal(t, redislimit.SourceFailOpen, r.Source)
	assert.True(t, r.Allowed)
	require.NoError(t, s.client(t).Do(ctx, "SCRIPT", "KILL").Err())
	assert.Error(t, <-done)
	assert.Equal(t, redislimit.SourceRedis, l.TakeResult(ctx, "k", 1).Source)
}
