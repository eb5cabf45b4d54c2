package httplimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/stacktest"
)

// allowAll is a limiter whose allow path is the real one (a CAS per
// request) but which never runs dry: T = 1ns, B = 100, so the bucket is full
// again long before the next request, and r = 99 has a precomputed value.
func allowAll[K comparable](b *testing.B) *atomiclimit.Keyed[K] {
	lim, err := atomiclimit.NewKeyed[K](gcra.Per(1_000_000_000, time.Second), 100, atomiclimit.WithSweepInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

func benchServe(b *testing.B, h http.Handler, r *http.Request, wantStatus int) {
	w := newReuseWriter()
	h.ServeHTTP(w, r) // create the key off the clock
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.reset()
		h.ServeHTTP(w, r)
	}
	b.StopTimer()
	if w.status != wantStatus {
		b.Fatalf("status %d, want %d", w.status, wantStatus)
	}
}

// BenchmarkMiddleware measures the middleware's overhead per request against
// the bare handler, on a ResponseWriter reused between requests (so the
// allocations counted are the middleware's own). headers=none is the
// limiter alone; the difference to headers=default is the header writes.
func BenchmarkMiddleware(b *testing.B) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.9:4711"
	b.Run("handler=bare", func(b *testing.B) { benchServe(b, okHandler, r, 200) })
	for _, tc := range []struct {
		name    string
		headers HeaderSet
		hook    *atomiclimit.Hook
	}{
		{"headers=none", HeadersNone, nil},
		{"headers=none/hook=on", HeadersNone, &atomiclimit.Hook{}},
		{"headers=default", DefaultHeaders, nil},
		{"headers=all", DefaultHeaders | HeaderLegacy, nil},
	} {
		b.Run("handler=limited/key=remote/"+tc.name, func(b *testing.B) {
			m, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}, Headers: tc.headers, Hook: tc.hook})
			if err != nil {
				b.Fatal(err)
			}
			benchServe(b, m.Handler(okHandler), r, 200)
		})
	}
	b.Run("handler=limited/key=xff/headers=default", func(b *testing.B) {
		key, _ := ClientIP(IPOptions{TrustedProxies: []netip.Prefix{mustPrefix("10.0.0.0/8")}})
		m, _ := New(Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}})
		r := r.Clone(r.Context())
		r.RemoteAddr = "10.0.0.1:4711"
		r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.0.0.2")
		benchServe(b, m.Handler(okHandler), r, 200)
	})
	b.Run("handler=denied/key=remote/headers=default", func(b *testing.B) {
		lim, _ := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1, time.Hour), 1, atomiclimit.WithSweepInterval(0))
		m, _ := New(Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}})
		benchServe(b, m.Handler(okHandler), r, 429)
	})
}

// BenchmarkMiddlewareRecorder is BenchmarkMiddleware with a new
// httptest.ResponseRecorder per request, as a handler test would use.
func BenchmarkMiddlewareRecorder(b *testing.B) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.9:4711"
	m, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{
		{"handler=bare", okHandler},
		{"handler=limited/headers=default", m.Handler(okHandler)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.h.ServeHTTP(httptest.NewRecorder(), r)
			b.ReportAllocs()
			for range b.N {
				w := httptest.NewRecorder()
				tc.h.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkKeyType compares keying the limiter by netip.Prefix (ClientIP)
// with keying it by the prefix's string form (p.String()): key function
// plus decision, 1024 distinct clients.
func BenchmarkKeyType(b *testing.B) {
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].RemoteAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), 1).String()
	}
	b.Run("key=prefix", func(b *testing.B) {
		lim := allowAll[netip.Prefix](b)
		for _, r := range reqs {
			k, _ := RemoteIP(r)
			stacktest.Decide(lim, k, 1)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			k, _ := RemoteIP(reqs[i%len(reqs)])
			stacktest.Decide(lim, k, 1)
		}
	})
	b.Run("key=string", func(b *testing.B) {
		lim := allowAll[string](b)
		key := func(r *http.Request) (string, error) {
			p, err := RemoteIP(r)
			return p.String(), err
		}
		for _, r := range reqs {
			k, _ := key(r)
			stacktest.Decide(lim, k, 1)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			k, _ := key(reqs[i%len(reqs)])
			stacktest.Decide(lim, k, 1)
		}
	})
}

// BenchmarkStacked measures the cost of each further policy a request is
// checked against (Config.Policies): policies=1 is BenchmarkMiddleware's
// limited case, and the step from one row to the next is one more Take, its
// hook and its header items. denied=second is a request the second policy
// denies: the first policy's admission is given back.
func BenchmarkStacked(b *testing.B) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.9:4711"
	names := []string{"a", "b", "c", "d"}
	for _, headers := range []struct {
		name string
		set  HeaderSet
	}{{"none", HeadersNone}, {"default", DefaultHeaders}} {
		for n := 1; n <= len(names); n++ {
			b.Run(fmt.Sprintf("headers=%s/policies=%d", headers.name, n), func(b *testing.B) {
				var pols []atomiclimit.Policy[netip.Prefix]
				for _, name := range names[:n] {
					pols = append(pols, atomiclimit.Policy[netip.Prefix]{Name: name, Limiter: allowAll[netip.Prefix](b)})
				}
				m, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: pols, Headers: headers.set})
				if err != nil {
					b.Fatal(err)
				}
				benchServe(b, m.Handler(okHandler), r, 200)
			})
		}
	}
	// clock=coarse: the same policies on the coarse clock (a cached time,
	// WithCoarseClock), so that each Take is a load instead of a clock
	// read: the part of a policy's cost that is the clock. T = 1ns with
	// B = 10^7 passes the coarse clock's check ((B−1)·T ≥ its tick) and
	// never runs dry; r is then above the prebuilt table, so the default
	// headers are not measured here.
	for n := 1; n <= len(names); n++ {
		b.Run(fmt.Sprintf("headers=none/policies=%d/clock=coarse", n), func(b *testing.B) {
			var pols []atomiclimit.Policy[netip.Prefix]
			for _, name := range names[:n] {
				lim, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1_000_000_000, time.Second), 10_000_000,
					atomiclimit.WithSweepInterval(0), atomiclimit.WithCoarseClock())
				if err != nil {
					b.Fatal(err)
				}
				pols = append(pols, atomiclimit.Policy[netip.Prefix]{Name: name, Limiter: lim})
			}
			m, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: pols, Headers: HeadersNone})
			if err != nil {
				b.Fatal(err)
			}
			benchServe(b, m.Handler(okHandler), r, 200)
		})
	}
	b.Run("headers=default/policies=2/denied=second", func(b *testing.B) {
		none, _ := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1, time.Hour), 1, atomiclimit.WithSweepInterval(0))
		m, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{
			{Name: "a", Limiter: allowAll[netip.Prefix](b)}, {Name: "b", Limiter: none}}})
		if err != nil {
			b.Fatal(err)
		}
		benchServe(b, m.Handler(okHandler), r, 429)
	})
}

// BenchmarkMiddlewareClients is BenchmarkMiddleware's admission with the
// default headers from 100,000 client addresses in turn (issue 25's many
// clients), beside the bare handler on the same requests: each request's
// key is looked up among 100,000.
func BenchmarkMiddlewareClients(b *testing.B) {
	const n = 100_000
	reqs := make([]*http.Request, n)
	base := httptest.NewRequest("GET", "/", nil)
	for i := range reqs {
		r := new(http.Request)
		*r = *base
		r.RemoteAddr = fmt.Sprintf("198.%d.%d.%d:4711", 18+i>>16, i>>8&255, i&255)
		reqs[i] = r
	}
	m, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{
		{"handler=bare", okHandler},
		{"handler=limited/headers=default", m.Handler(okHandler)},
	} {
		b.Run(fmt.Sprintf("clients=%d/%s", n, tc.name), func(b *testing.B) {
			w := newReuseWriter()
			for _, r := range reqs {
				w.reset()
				tc.h.ServeHTTP(w, r) // create every key off the clock
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w.reset()
				tc.h.ServeHTTP(w, reqs[i%n])
			}
			b.StopTimer()
			if w.status != 200 {
				b.Fatalf("status %d", w.status)
			}
		})
	}
}
