package httplimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/internal/stacktest"
)

// Stacked policies through a real server on loopback, every kind before
// every other: eight clients on their own keep-alive connections send 50
// requests each from one address, a generous policy first and a strict one
// (5 per hour) after it. Each policy is charged what was served: exactly
// for a window, within a token for a bucket.
func TestEndToEndStackContention(t *testing.T) {
	const workers, calls = 8, 50
	key := netip.MustParsePrefix("127.0.0.1/32")
	for _, p := range stacktest.Pairs() {
		t.Run(stacktest.Name(p), func(t *testing.T) {
			gen := stacktest.Keyed[netip.Prefix](t, p[0].Generous)
			strict := stacktest.Keyed[netip.Prefix](t, p[1].Strict)
			m := mustNew(t, Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{
				{Name: "generous", Limiter: gen}, {Name: "strict", Limiter: strict}}})
			srv := httptest.NewServer(m.Handler(okHandler))
			defer srv.Close()
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = workers
			served := stacktest.Hammer(workers, calls, func(int, int) bool {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return false
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("status %d", resp.StatusCode)
				}
				return resp.StatusCode == http.StatusOK
			})
			if served == 0 || served > stacktest.StrictQuota {
				t.Fatalf("served %d of %d, want 1 to %d", served, workers*calls, stacktest.StrictQuota)
			}
			cg, cs := stacktest.Charged[netip.Prefix](gen, key, p[0].Quota), stacktest.Charged[netip.Prefix](strict, key, stacktest.StrictQuota)
			stacktest.Check(t, "generous", p[0], cg, served)
			stacktest.Check(t, "strict", p[1], cs, served)
			t.Logf("served %d; generous charged %d, strict %d", served, cg, cs)
		})
	}
}
