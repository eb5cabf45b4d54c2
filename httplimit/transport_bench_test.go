package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// BenchmarkTransport measures what the Transport adds to a request over
// the stub base transport alone (base=stub), which answers every request
// with one response and allocates nothing: the transport keying the
// request by its host, looking for a hold, waiting for its policies
// (admitted at once: allowAll) and reading the response's fields. The
// RateLimit cases give the response a RateLimit field to read.
func BenchmarkTransport(b *testing.B) {
	req := mustRequest("GET", "http://api.example/v1/items")
	run := func(b *testing.B, rt http.RoundTripper) {
		rt.RoundTrip(req) // create the key off the clock
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("base=stub", func(b *testing.B) { run(b, newStubBase()) })
	// The stub behind a policy's Take and nothing else: what a client
	// limited by hand pays, the floor under policies=1.
	b.Run("base=stub/take=1", func(b *testing.B) {
		s, err := atomiclimit.NewStack(atomiclimit.Policy[string]{Name: "a", Limiter: allowAll[string](b)})
		if err != nil {
			b.Fatal(err)
		}
		base := newStubBase()
		run(b, roundTripFunc(func(r *http.Request) (*http.Response, error) {
			var out [1]atomiclimit.Outcome
			if res, _ := s.Take(r.Context(), r.URL.Host, 1, out[:]); res != atomiclimit.Pass {
				b.Fatal(res)
			}
			return base.RoundTrip(r)
		}))
	})
	for _, c := range []struct {
		name     string
		policies int
		fields   bool
	}{
		{"policies=0", 0, false},
		{"policies=1", 1, false},
		{"policies=2", 2, false},
		{"policies=1/ratelimit=on", 1, true},
	} {
		b.Run("base=transport/"+c.name, func(b *testing.B) {
			base := newStubBase()
			if c.fields {
				base.resp.Header.Set("RateLimit", `"api";r=41;t=1`)
			}
			var pols []atomiclimit.Policy[string]
			for i := range c.policies {
				pols = append(pols, atomiclimit.Policy[string]{Name: string(rune('a' + i)), Limiter: allowAll[string](b)})
			}
			run(b, mustTransport(b, TransportConfig[string]{Base: base, Policies: pols, MaxWait: time.Second}))
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
