package httplimit

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// ledger wraps a Keyed limiter and records, per key, the time of every
// admission it made and which of them were given back: what the policy was
// charged for.
type ledger struct {
	*atomiclimit.Keyed[netip.Prefix]
	clock *fakeClock
	mu    sync.Mutex
	kept  map[netip.Prefix]map[atomiclimit.Receipt]time.Time // admissions not given back
	all   map[netip.Prefix][]time.Time                       // admissions whose receipt is 0 (cannot be given back)
	back  int                                                // refunds
}

func newLedger(t *testing.T, c *fakeClock, rule atomiclimit.Rule) *ledger {
	k, err := atomiclimit.NewKeyedRule[netip.Prefix](rule, atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	return &ledger{Keyed: k, clock: c, kept: map[netip.Prefix]map[atomiclimit.Receipt]time.Time{}, all: map[netip.Prefix][]time.Time{}}
}

func (l *ledger) Take(ctx context.Context, key netip.Prefix, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	d, r, err := l.Keyed.Take(ctx, key, n)
	if d.Allowed && n > 0 {
		l.mu.Lock()
		if r == (atomiclimit.Receipt{}) {
			l.all[key] = append(l.all[key], l.clock.Now())
		} else {
			if l.kept[key] == nil {
				l.kept[key] = map[atomiclimit.Receipt]time.Time{}
			}
			l.kept[key][r] = l.clock.Now()
		}
		l.mu.Unlock()
	}
	return d, r, err
}

func (l *ledger) Refund(ctx context.Context, key netip.Prefix, n int, r atomiclimit.Receipt) (bool, error) {
	ok, err := l.Keyed.Refund(ctx, key, n, r)
	if ok {
		l.mu.Lock()
		delete(l.kept[key], r)
		l.back++
		l.mu.Unlock()
	}
	return ok, err
}

// charged returns the times of key's admissions that the policy kept.
func (l *ledger) charged(key netip.Prefix) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := slices.Clone(l.all[key])
	for _, t := range l.kept[key] {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// End to end with stacked policies: a real server on 127.0.0.1 and real
// clients (a trusted proxy's connections, naming six clients in
// X-Forwarded-For). Every request is held to two policies per client IP, a
// token bucket and a fixed window, and POST /login to a sliding log as well.
// The server's limiters run on a clock the test moves between rounds; in a
// round, every client sends its requests one after another, all clients at
// once. For every policy and every client: its bound holds in every window,
// and it was charged for exactly the requests that were served (no more:
// no charge for a request another policy denied).
func TestEndToEndStacked(t *testing.T) {
	c := newFakeClock()
	start := c.Now()
	bucket := newLedger(t, c, atomiclimit.GCRA(gcra.Every(250*time.Millisecond), 4))
	window := newLedger(t, c, atomiclimit.FixedWindow(10, 2*time.Second))
	login := newLedger(t, c, atomiclimit.SlidingLog(3, time.Second))
	key, err := ClientIP(IPOptions{TrustedProxies: []netip.Prefix{mustPrefix("127.0.0.0/8"), mustPrefix("::1/128")}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	m := mustNew(t, Config[netip.Prefix]{
		Key:      key,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "bucket", Limiter: bucket}, {Name: "window", Limiter: window}},
		Routes:   map[string]atomiclimit.Policy[netip.Prefix]{"POST /login": {Name: "login", Limiter: login}},
		Mux:      mux,
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "item") })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "welcome") })
	srv := httptest.NewServer(m.Handler(mux))
	defer srv.Close()
	hc := srv.Client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 8

	clients := []string{"198.51.100.1", "198.51.100.2", "198.51.100.3", "2001:db8:1::1", "2001:db8:2::1", "203.0.113.9"}
	type tally struct{ served, loginServed, denied int }
	tallies := make([]tally, len(clients))
	rounds := 80
	if testing.Short() {
		rounds = 30
	}
	for round := range rounds {
		c.Add(100 * time.Millisecond)
		var wg sync.WaitGroup
		errs := make(chan error, len(clients))
		for i, ip := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(i)))
				for range rng.IntN(5) {
					method, path := "GET", "/items/1"
					if rng.IntN(3) == 0 {
						method, path = "POST", "/login"
					}
					req, _ := http.NewRequest(method, srv.URL+path, nil)
					req.Header.Set("X-Forwarded-For", ip)
					resp, err := hc.Do(req)
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch resp.StatusCode {
					case 200:
						tallies[i].served++
						if path == "/login" {
							tallies[i].loginServed++
						}
					case 429:
						tallies[i].denied++
					default:
						errs <- fmt.Errorf("%s %s from %s: %s", method, path, ip, resp.Status)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}

	since := func(ts []time.Time) []time.Duration {
		ds := make([]time.Duration, len(ts))
		for i, t := range ts {
			ds[i] = t.Sub(start)
		}
		return ds
	}
	for i, ip := range clients {
		k, _ := key(&http.Request{RemoteAddr: "127.0.0.1:1", Header: http.Header{"X-Forwarded-For": {ip}}})
		tl := tallies[i]
		b, w, l := since(bucket.charged(k)), since(window.charged(k)), since(login.charged(k))
		t.Logf("%s: %d served (%d logins), %d denied; charged: bucket %d, window %d, login %d", ip, tl.served, tl.loginServed, tl.denied, len(b), len(w), len(l))
		if len(b) != tl.served || len(w) != tl.served || len(l) != tl.loginServed {
			t.Errorf("%s: charged bucket %d, window %d, login %d; served %d (%d logins): a policy was charged for a denied request",
				ip, len(b), len(w), len(l), tl.served, tl.loginServed)
		}
		if tl.denied == 0 {
			t.Errorf("%s: nothing denied: the bounds were not reached", ip)
		}
		// The token bucket: j−i+1 ≤ B + (t_j−t_i)/T for every run of admissions.
		for j := range b {
			for i := 0; i < j; i++ {
				if count := int64(j - i + 1); (count-4)*int64(250*time.Millisecond) > int64(b[j]-b[i]) {
					t.Fatalf("%s: bucket admitted %d in [%v, %v]", ip, count, b[i], b[j])
				}
			}
		}
		// The fixed window: at most 10 per window of 2s (aligned to the
		// limiter's start, the clock's value when it was built).
		perWindow := map[time.Duration]int{}
		for _, d := range w {
			perWindow[d/(2*time.Second)]++
		}
		for win, n := range perWindow {
			if n > 10 {
				t.Fatalf("%s: window %d admitted %d > 10", ip, win, n)
			}
		}
		// The log: at most 3 in any rolling second.
		for j := 3; j < len(l); j++ {
			if l[j]-l[j-3] < time.Second {
				t.Fatalf("%s: login admitted 4 within %v", ip, l[j]-l[j-3])
			}
		}
	}
	if bucket.back == 0 || window.back == 0 {
		t.Errorf("refunds: bucket %d, window %d: the test never gave an admission back", bucket.back, window.back)
	}
}
