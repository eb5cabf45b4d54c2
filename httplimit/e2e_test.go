package httplimit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/stacktest"
)

// recordingLimiter decides on a real Keyed limiter at times it reads itself,
// and records the time of every admission: the exact instants the GCRA
// bound is stated in.
type recordingLimiter struct {
	k        *atomiclimit.Keyed[netip.Prefix]
	mu       sync.Mutex
	admitted map[netip.Prefix][]time.Duration // since start
	start    time.Time
}

func (l *recordingLimiter) Take(_ context.Context, key netip.Prefix, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	now := time.Now()
	d := stacktest.DecideN(l.k, key, now, n)
	if d.Allowed {
		l.mu.Lock()
		l.admitted[key] = append(l.admitted[key], now.Sub(l.start))
		l.mu.Unlock()
	}
	return d, atomiclimit.Receipt{}, nil
}

func (l *recordingLimiter) Peek(_ context.Context, key netip.Prefix, n int) (gcra.Decision, error) {
	return l.k.PeekN(key, time.Now(), n), nil
}

func (l *recordingLimiter) Refund(context.Context, netip.Prefix, int, atomiclimit.Receipt) (bool, error) {
	return false, nil
}

func (l *recordingLimiter) Quota(key netip.Prefix) atomiclimit.Quota { return l.k.Quota(key) }

// End to end: a real server on 127.0.0.1 behind a "proxy" (the test client,
// trusted, sending X-Forwarded-For), driven by a bounded pool of concurrent
// clients. Admitted requests per key never exceed B + d/T over any interval
// d of the admissions, nor over the whole run as the clients saw it.
func TestEndToEndBound(t *testing.T) {
	const (
		burst   = 4
		workers = 16
	)
	interval := 20 * time.Millisecond
	run := 600 * time.Millisecond
	if testing.Short() {
		run = 200 * time.Millisecond
	}
	k, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Every(interval), burst, atomiclimit.WithSweepInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	lim := &recordingLimiter{k: k, admitted: map[netip.Prefix][]time.Duration{}}
	key, err := ClientIP(IPOptions{TrustedProxies: []netip.Prefix{mustPrefix("127.0.0.0/8"), mustPrefix("::1/128")}})
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "e2e", Limiter: lim}}})
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = workers

	clients := []string{"198.51.100.1", "198.51.100.2", "2001:db8:7::1"}
	type tally struct{ ok, denied, other int }
	var mu sync.Mutex
	tallies := map[string]*tally{}
	for _, c := range clients {
		tallies[c] = &tally{}
	}
	var badHeaders []string

	lim.start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				c := clients[i%len(clients)]
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
				req.Header.Set("X-Forwarded-For", "10.9.9.9, "+c) // the leftmost entry is a spoof
				resp, err := client.Do(req)
				if err != nil {
					continue // the deadline, mid-request
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case 200:
					tallies[c].ok++
				case 429:
					tallies[c].denied++
					if ra := resp.Header.Get("Retry-After"); !retryRE.MatchString(ra) || !rateRE.MatchString(resp.Header.Get("RateLimit")) {
						badHeaders = append(badHeaders, fmt.Sprintf("Retry-After %q RateLimit %q", ra, resp.Header.Get("RateLimit")))
					}
				default:
					tallies[c].other++
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	// A request the client gave up on at the deadline may still be in a
	// handler: Close waits for them, so every admission is recorded.
	srv.Close()
	elapsed := time.Since(lim.start)
	lim.mu.Lock()
	defer lim.mu.Unlock()

	if len(badHeaders) > 0 {
		t.Errorf("malformed headers on denials: %q", badHeaders[:min(3, len(badHeaders))])
	}
	if len(lim.admitted) != len(clients) {
		t.Errorf("keys seen: %v, want the %d clients' (a spoofed entry or the proxy became a key?)", keysOf(lim.admitted), len(clients))
	}
	T := int64(interval)
	for _, c := range clients {
		p, _ := key(&http.Request{RemoteAddr: "127.0.0.1:1", Header: http.Header{"X-Forwarded-For": {c}}})
		times := lim.admitted[p]
		tl := tallies[c]
		bound := burst + int(elapsed/interval)
		t.Logf("%s (key %v): %d admitted (%d answered 200), %d denied, %d other in %v; bound B + elapsed/T = %d",
			c, p, len(times), tl.ok, tl.denied, tl.other, elapsed.Round(time.Millisecond), bound)
		if tl.ok > bound || len(times) > bound {
			t.Errorf("%s: %d admitted (%d answered) in %v > B + elapsed/T = %d", c, len(times), tl.ok, elapsed, bound)
		}
		if tl.ok > len(times) {
			t.Errorf("%s: clients saw %d admissions, the limiter made %d", c, tl.ok, len(times))
		}
		if tl.denied == 0 {
			t.Errorf("%s: no request denied: the clients did not reach the limit, the bound was not tested", c)
		}
		if tl.other != 0 {
			t.Errorf("%s: %d responses neither 200 nor 429", c, tl.other)
		}
		// Every interval [t_i, t_j] of the admissions: j−i+1 ≤ B + (t_j−t_i)/T.
		slices.Sort(times)
		for j := range times {
			for i := 0; i < j; i++ {
				if count := int64(j - i + 1); (count-burst)*T > int64(times[j]-times[i]) {
					t.Fatalf("%s: %d admissions in [%v, %v] (%v) > B + d/T = %.2f",
						c, count, times[i], times[j], times[j]-times[i], burst+float64(times[j]-times[i])/float64(T))
				}
			}
		}
	}
}

func keysOf[K comparable, V any](m map[K]V) []K {
	var ks []K
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
