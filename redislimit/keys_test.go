package redislimit_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// Key types defined on the supported kinds: they are written as their
// underlying type is.
type (
	userID  string
	shardNo uint16
	uuid    [16]byte
)

// keyOf returns the Redis key of k under a Limiter[K] with opts (on a
// client that is never called).
func keyOf[K comparable](t *testing.T, k K, opts ...redislimit.Option) string {
	t.Helper()
	l, err := redislimit.NewKeyed[K](&noServer{}, gcra.Every(time.Second), 1, opts...)
	require.NoError(t, err)
	return l.Key(k)
}

// TestKeyEncoding pins the Redis key of a key of every supported type, as
// the package doc ("Keys") writes it, under the default prefix, another
// prefix, and a hash tag.
func TestKeyEncoding(t *testing.T) {
	p := redislimit.WithKeyPrefix("p:")
	tag := redislimit.WithHashTag()
	cases := []struct{ got, want string }{
		// Strings as they are: the keys every release has written.
		{keyOf(t, "user:42"), "atomiclimit:user:42"},
		{keyOf(t, "user:42", p), "p:user:42"},
		{keyOf(t, "user:42", p, tag), "p:{user:42}"},
		{keyOf(t, ""), "atomiclimit:"},
		{keyOf(t, "\x00{}\xff"), "atomiclimit:\x00{}\xff"},
		{keyOf(t, userID("u7")), "atomiclimit:u7"},

		// netip.Prefix: Prefix.String for every valid prefix.
		{keyOf(t, netip.MustParsePrefix("192.0.2.1/32")), "atomiclimit:192.0.2.1/32"},
		{keyOf(t, netip.MustParsePrefix("2001:db8::/64"), p), "p:2001:db8::/64"},
		{keyOf(t, netip.MustParsePrefix("2001:db8::/64"), p, tag), "p:{2001:db8::/64}"},
		{keyOf(t, netip.MustParsePrefix("::ffff:192.0.2.0/120")), "atomiclimit:::ffff:192.0.2.0/120"},
		{keyOf(t, netip.MustParsePrefix("0.0.0.0/0")), "atomiclimit:0.0.0.0/0"},
		{keyOf(t, netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")), "atomiclimit:ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"},
		{keyOf(t, netip.MustParsePrefix("10.1.2.3/8")), "atomiclimit:10.1.2.3/8"}, // not masked: a key of its own, as in process
		// and each invalid prefix a text of its own.
		{keyOf(t, netip.Prefix{}), "atomiclimit:invalid IP/-1"},
		{keyOf(t, netip.PrefixFrom(netip.MustParseAddr("192.0.2.1"), 33)), "atomiclimit:192.0.2.1/-1"},

		// netip.Addr: its String form.
		{keyOf(t, netip.MustParseAddr("192.0.2.1")), "atomiclimit:192.0.2.1"},
		{keyOf(t, netip.MustParseAddr("2001:db8::1"), p, tag), "p:{2001:db8::1}"},
		{keyOf(t, netip.MustParseAddr("::ffff:192.0.2.1")), "atomiclimit:::ffff:192.0.2.1"},
		{keyOf(t, netip.MustParseAddr("fe80::1%eth0")), "atomiclimit:fe80::1%eth0"},
		{keyOf(t, netip.MustParseAddr("fe80::1").WithZone(strings.Repeat("z", 100))), "atomiclimit:fe80::1%" + strings.Repeat("z", 100)},
		{keyOf(t, netip.Addr{}), "atomiclimit:invalid IP"},

		// Integers in decimal, every size, signed or not.
		{keyOf(t, 42), "atomiclimit:42"},
		{keyOf(t, -7, p, tag), "p:{-7}"},
		{keyOf(t, int8(math.MinInt8)), "atomiclimit:-128"},
		{keyOf(t, int16(math.MaxInt16)), "atomiclimit:32767"},
		{keyOf(t, int32(math.MinInt32)), "atomiclimit:-2147483648"},
		{keyOf(t, int64(math.MinInt64)), "atomiclimit:-9223372036854775808"},
		{keyOf(t, uint(7)), "atomiclimit:7"},
		{keyOf(t, uint8(255)), "atomiclimit:255"},
		{keyOf(t, shardNo(65535)), "atomiclimit:65535"},
		{keyOf(t, uint32(math.MaxUint32)), "atomiclimit:4294967295"},
		{keyOf(t, uint64(math.MaxUint64)), "atomiclimit:18446744073709551615"},
		{keyOf(t, uintptr(9)), "atomiclimit:9"},

		// Byte arrays: their bytes.
		{keyOf(t, [4]byte{'a', 0, '}', 0xff}), "atomiclimit:a\x00}\xff"},
		{keyOf(t, uuid{0: 1, 15: 2}, p), "p:\x01" + strings.Repeat("\x00", 14) + "\x02"},
		{keyOf(t, [0]byte{}), "atomiclimit:"},
	}
	for i, c := range cases {
		assert.Equal(t, c.want, c.got, "case %d", i)
	}
}

// TestKeyPrefixOneToOne: two different prefixes never share a Redis key,
// valid or not, IPv4, IPv6 or IPv4-mapped, at every length; and a valid
// prefix is written as Prefix.String.
func TestKeyPrefixOneToOne(t *testing.T) {
	l, err := redislimit.NewKeyed[netip.Prefix](&noServer{}, gcra.Every(time.Second), 1)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(29, 6))
	seen := map[string]netip.Prefix{}
	add := func(p netip.Prefix) {
		k := l.Key(p)
		if q, ok := seen[k]; ok && q != p {
			t.Fatalf("%v with %d bits and %v with %d bits share the Redis key %q", p.Addr(), p.Bits(), q.Addr(), q.Bits(), k)
		}
		seen[k] = p
		if p.IsValid() {
			require.Equal(t, "atomiclimit:"+p.String(), k)
		}
	}
	var addrs []netip.Addr
	for range 200 {
		var b16 [16]byte
		for i := range b16 {
			b16[i] = byte(rng.Uint32())
		}
		a6 := netip.AddrFrom16(b16)
		a4 := netip.AddrFrom4([4]byte(b16[12:]))
		mapped := netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b16[12], 13: b16[13], 14: b16[14], 15: b16[15]})
		addrs = append(addrs, a6, a4, mapped)
	}
	// Few addresses (all of them, and 0.0.0.0 and ::) at every length:
	// prefixes that differ in their length only, or in the bits a mask
	// would clear, stay apart.
	addrs = append(addrs, netip.IPv4Unspecified(), netip.IPv6Unspecified(), netip.Addr{})
	for _, a := range addrs {
		for bits := -1; bits <= 129; bits++ {
			add(netip.PrefixFrom(a, bits))
			if pm, err := a.Prefix(max(bits, 0)); err == nil {
				add(pm) // masked
			}
		}
	}
	add(netip.Prefix{})
	assert.Greater(t, len(seen), 200*3*100)
}

// TestKeyAllocs: writing the Redis key is one allocation, for a string
// key as for a key of any other type with an encoding; and a decision of a
// Limiter keyed by netip.Prefix or an integer allocates what one keyed by
// a string does.
func TestKeyAllocs(t *testing.T) {
	tag := redislimit.WithHashTag()
	for _, c := range []struct {
		name string
		key  func() string
	}{
		{"string", keyFunc(t, "user:42")},
		{"string/hash-tag", keyFunc(t, "user:42", tag)},
		{"prefix/v4", keyFunc(t, netip.MustParsePrefix("192.0.2.1/32"))},
		{"prefix/v6", keyFunc(t, netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"), tag)},
		{"prefix/long-key-prefix", keyFunc(t, netip.MustParsePrefix("2001:db8::/64"), redislimit.WithKeyPrefix(strings.Repeat("p", 200)))},
		{"addr", keyFunc(t, netip.MustParseAddr("2001:db8::1"))},
		{"int64", keyFunc(t, int64(math.MinInt64), tag)},
		{"uint8", keyFunc(t, uint8(7))},
		{"uuid", keyFunc(t, uuid{1, 2, 3})},
	} {
		assert.Equal(t, 1.0, testing.AllocsPerRun(200, func() { _ = c.key() }), c.name)
	}

	// A whole decision, on a client that answers every call with a denial.
	ctx := context.Background()
	canned := cannedScripter{int64(2_000_000)} // debt 1s, denied
	s, err := redislimit.NewKeyed[string](canned, gcra.Every(time.Hour), 1)
	require.NoError(t, err)
	p, err := redislimit.NewKeyed[netip.Prefix](canned, gcra.Every(time.Hour), 1)
	require.NoError(t, err)
	n, err := redislimit.NewKeyed[int64](canned, gcra.Every(time.Hour), 1)
	require.NoError(t, err)
	pk := netip.MustParsePrefix("2001:db8::/64")
	ks := pk.String()
	str := testing.AllocsPerRun(200, func() { s.Take(ctx, ks, 1) })
	assert.Equal(t, str, testing.AllocsPerRun(200, func() { p.Take(ctx, pk, 1) }), "Take, netip.Prefix")
	assert.Equal(t, str, testing.AllocsPerRun(200, func() { n.Take(ctx, 42, 1) }), "Take, int64")
}

// keyFunc returns a call of Key(k) on a Limiter[K] with opts.
func keyFunc[K comparable](t *testing.T, k K, opts ...redislimit.Option) func() string {
	l, err := redislimit.NewKeyed[K](&noServer{}, gcra.Every(time.Second), 1, opts...)
	require.NoError(t, err)
	return func() string { return l.Key(k) }
}

// TestWithKeyFunc: the function writes the key, for a type with no
// encoding and in place of a type's own; the state lives at that Redis
// key, in a hash tag under WithHashTag.
func TestWithKeyFunc(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	type tenantUser struct {
		tenant string
		user   int
	}
	prefix := uniq(t)
	calls := 0
	l, err := redislimit.NewKeyed[tenantUser](c, gcra.Every(time.Hour), 1,
		redislimit.WithKeyPrefix(prefix), redislimit.WithHashTag(),
		redislimit.WithKeyFunc(func(k tenantUser) string {
			calls++
			return k.tenant + "/" + string(rune('0'+k.user))
		}))
	require.NoError(t, err)
	assert.Equal(t, prefix+"{acme/7}", l.Key(tenantUser{"acme", 7}))
	assert.True(t, l.Allow(ctx, tenantUser{"acme", 7}))
	assert.False(t, l.Allow(ctx, tenantUser{"acme", 7}))
	assert.True(t, l.Allow(ctx, tenantUser{"acme", 8}))
	assert.Equal(t, int64(1), c.Exists(ctx, prefix+"{acme/7}").Val(), "the state is at the function's key")
	assert.Equal(t, 4, calls)

	// A type's own encoding, replaced: prefixes by their network only.
	masked, err := redislimit.NewKeyed[netip.Prefix](c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(prefix),
		redislimit.WithKeyFunc(func(p netip.Prefix) string { return p.Masked().String() }))
	require.NoError(t, err)
	assert.Equal(t, prefix+"10.0.0.0/8", masked.Key(netip.MustParsePrefix("10.1.2.3/8")))
	assert.True(t, masked.Allow(ctx, netip.MustParsePrefix("10.1.2.3/8")))
	assert.False(t, masked.Allow(ctx, netip.MustParsePrefix("10.9.9.9/8")), "one network, one state")

	// And for strings.
	upper, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 1, redislimit.WithKeyFunc(strings.ToUpper))
	require.NoError(t, err)
	assert.Equal(t, "atomiclimit:ALICE", upper.Key("alice"))
}

// TestKeyTypeErrors: a key type with no encoding needs WithKeyFunc, and a
// WithKeyFunc or FallbackTo of another key type is an error, each
// matchable with errors.Is and said once with the package's prefix.
func TestKeyTypeErrors(t *testing.T) {
	none := &noServer{}
	lim := gcra.Every(time.Second)
	type point struct{ x, y int }
	local, err := atomiclimit.NewKeyed[string](lim, 1)
	require.NoError(t, err)
	defer local.Close()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"float64", newErr[float64](none, lim), redislimit.ErrKeyType},
		{"bool", newErr[bool](none, lim), redislimit.ErrKeyType},
		{"struct", newErr[point](none, lim), redislimit.ErrKeyType},
		{"interface", newErr[any](none, lim), redislimit.ErrKeyType},
		{"pointer", newErr[*int](none, lim), redislimit.ErrKeyType},
		{"array of int", newErr[[2]int](none, lim), redislimit.ErrKeyType},
		{"complex", newErr[complex128](none, lim), redislimit.ErrKeyType},
		{"rule", ruleErr[point](none), redislimit.ErrKeyType},
		{"static limit", newErr[point](none, gcra.Unlimited), redislimit.ErrKeyType},
		{"key func of another type", newErr[int](none, lim, redislimit.WithKeyFunc(strings.ToUpper)), redislimit.ErrKeyType},
		{"nil key func", newErr[point](none, lim, redislimit.WithKeyFunc[point](nil)), redislimit.ErrKeyType},
		{"fallback of another type", newErr[netip.Prefix](none, lim, redislimit.WithOutage(redislimit.FallbackTo(local))), redislimit.ErrInvalidOutage},
		{"nil fallback", newErr[netip.Prefix](none, lim, redislimit.WithOutage(redislimit.FallbackTo[netip.Prefix](nil))), redislimit.ErrInvalidOutage},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
			continue
		}
		msg := c.err.Error()
		assert.True(t, strings.HasPrefix(msg, "redislimit: "), "%s: %q", c.name, msg)
		assert.Equal(t, 1, strings.Count(msg, "redislimit: "), "%s: %q", c.name, msg)
	}
	assert.Contains(t, newErr[float64](none, lim).Error(), "float64")
	assert.Contains(t, newErr[float64](none, lim).Error(), "WithKeyFunc")
	assert.Zero(t, none.calls)

	// With a key function, any comparable type is a key.
	l, err := redislimit.NewKeyed[point](none, lim, 1, redislimit.WithKeyFunc(func(point) string { return "x" }))
	require.NoError(t, err)
	assert.Equal(t, "atomiclimit:x", l.Key(point{1, 2}))
}

func newErr[K comparable](c *noServer, lim gcra.Limit, opts ...redislimit.Option) error {
	_, err := redislimit.NewKeyed[K](c, lim, 1, opts...)
	return err
}

func ruleErr[K comparable](c *noServer) error {
	_, err := redislimit.NewKeyedRule[K](c, atomiclimit.SlidingLog(3, time.Second))
	return err
}

// TestKeyedPrefix runs a Limiter keyed by netip.Prefix through everything
// that holds keys besides Redis: the over-limit cache, a Leased's cells,
// FallbackTo's limiter; and shows that it shares its states with a
// Limiter keyed by the prefixes' String form, on one prefix.
func TestKeyedPrefix(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	net1, net2 := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("192.0.2.7/32")

	t.Run("over-limit cache", func(t *testing.T) {
		cs := &countingScripter{Client: s.client(t)}
		l, err := redislimit.NewKeyed[netip.Prefix](cs, gcra.Every(time.Hour), 1,
			redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10))
		require.NoError(t, err)
		require.True(t, l.Allow(ctx, net1))
		require.Equal(t, redislimit.SourceRedis, l.TakeResult(ctx, net1, 1).Source)
		calls := cs.count()
		assert.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, net1, 1).Source)
		assert.False(t, l.Allow(ctx, net1))
		assert.Equal(t, calls, cs.count(), "the cache answers net1")
		assert.True(t, l.Allow(ctx, net2), "and only net1")
		assert.Equal(t, 1, l.CacheLen())
		assert.Zero(t, testing.AllocsPerRun(100, func() { l.Allow(ctx, net1) }), "a cache hit allocates nothing")
	})

	t.Run("leases", func(t *testing.T) {
		l, err := redislimit.NewKeyed[netip.Prefix](s.client(t), gcra.Every(time.Hour), 4, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		ls, err := redislimit.NewLeased(l, 4, time.Minute)
		require.NoError(t, err)
		admitted := 0
		for range 6 {
			if ls.Allow(ctx, net1) {
				admitted++
			}
		}
		assert.Equal(t, 4, admitted)
		assert.True(t, ls.HasCell(net1))
		assert.True(t, ls.Allow(ctx, net2))
	})

	t.Run("fallback", func(t *testing.T) {
		down := startServer(t)
		c := down.client(t)
		down.kill()
		local, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Every(time.Hour), 2)
		require.NoError(t, err)
		defer local.Close()
		l, err := redislimit.NewKeyed[netip.Prefix](c, gcra.Every(time.Hour), 10, redislimit.WithOutage(redislimit.FallbackTo(local)))
		require.NoError(t, err)
		for i, want := range []bool{true, true, false} {
			r := l.TakeResult(ctx, net1, 1)
			assert.Equal(t, redislimit.SourceFallback, r.Source, "request %d", i)
			assert.Equal(t, want, r.Allowed, "request %d", i)
		}
		d, rc, err := l.Take(ctx, net2, 1)
		require.True(t, d.Allowed)
		require.ErrorIs(t, err, atomiclimit.ErrFallback)
		ok, err := l.Refund(ctx, net2, 1, rc)
		require.NoError(t, err)
		assert.True(t, ok, "the local limiter's admission is given back there, by its key")
	})

	t.Run("same state as its string form", func(t *testing.T) {
		prefix := uniq(t)
		byPrefix, err := redislimit.NewKeyed[netip.Prefix](s.client(t), gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(prefix))
		require.NoError(t, err)
		byString, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(prefix))
		require.NoError(t, err)
		// Burst 3, taken in turns: the fourth is denied by either.
		assert.True(t, byPrefix.Allow(ctx, net1))
		assert.True(t, byString.Allow(ctx, net1.String()))
		assert.True(t, byPrefix.Allow(ctx, net1))
		assert.False(t, byString.Allow(ctx, net1.String()), "one state for both")
		assert.False(t, byPrefix.Allow(ctx, net1), "one state for both")
	})
}
