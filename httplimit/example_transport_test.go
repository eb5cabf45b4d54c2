package httplimit_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// hardLimit is a provider's API with a hard limit: n calls, the whole quota
// back one period after the first call (an anchored window); past it, 429
// Too Many Requests with Retry-After, in whole seconds. It counts what it
// answered.
type hardLimit struct {
	n      int
	period time.Duration

	mu                sync.Mutex
	start             time.Time
	used              int
	answered, refused int
}

func (p *hardLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.start.IsZero() || now.Sub(p.start) >= p.period {
		p.start, p.used = now, 0
	}
	p.answered++
	if p.used < p.n {
		p.used++
		return
	}
	p.refused++
	wait := p.start.Add(p.period).Sub(now)
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	w.WriteHeader(http.StatusTooManyRequests)
}

// The founding scenario in one process: an API that allows 5 calls per
// 100ms and refuses past that, and a client whose eight goroutines call it
// through a Transport limited to one call per 40ms, below the provider's
// limit with room for the network's jitter. The calls wait for the policy
// in turn, in the order they came; the provider refuses none.
func ExampleNewTransport() {
	provider := &hardLimit{n: 5, period: 100 * time.Millisecond}
	srv := httptest.NewServer(provider)
	defer srv.Close()

	self, _ := atomiclimit.NewKeyed[string](gcra.Every(40*time.Millisecond), 1)
	tr, err := httplimit.NewTransport(httplimit.TransportConfig[string]{
		Policies: []atomiclimit.Policy[string]{{Name: "api", Limiter: self}},
		MaxWait:  10 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}

	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				resp, err := client.Get(srv.URL + "/v1/items")
				if err != nil {
					panic(err)
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d calls answered 200, %d refused\n", ok.Load(), provider.refused)
	// Output:
	// 16 calls answered 200, 0 refused
}

// A client that only listens: it has no limit of its own, and its
// provider allows 2 calls per second. The third call is refused with
// Retry-After: 1; the Transport holds the host for that second (every
// call to it waits), then sends the call again, and the caller gets the
// provider's 200. The hook hears the hold and the retry.
func ExampleNewTransport_listen() {
	provider := &hardLimit{n: 2, period: time.Second}
	srv := httptest.NewServer(provider)
	defer srv.Close()

	tr, err := httplimit.NewTransport(httplimit.TransportConfig[string]{
		Retries: 1,
		Hook: &atomiclimit.Hook{
			Held:    func(name string, d time.Duration) { fmt.Printf("%s held for %v\n", name, d) },
			Retried: func(name string, attempt int) { fmt.Printf("%s retry %d\n", name, attempt) },
		},
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	for i := range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("call %d: %s\n", i+1, resp.Status)
	}
	fmt.Printf("the provider answered %d, refused %d\n", provider.answered, provider.refused)
	// Output:
	// call 1: 200 OK
	// call 2: 200 OK
	// provider held for 1s
	// provider retry 1
	// call 3: 200 OK
	// the provider answered 4, refused 1
}

// A client of an API that allows 60 calls a minute, 1,000 an hour and
// 10,000 per rolling day, with the three limits stacked in process: a
// call goes only when all three allow it. The clock is a ManualClock, a
// day of calls in a moment: each minute the client calls until the
// Transport says a call must wait, and MaxWait (half a second, of real
// time: every wait here is a second or more of the ManualClock's) makes
// it say so at once, naming the limit and the wait.
func ExampleNewTransport_stacked() {
	clock := &atomiclimit.ManualClock{}
	at := atomiclimit.WithClock(clock)
	minute, _ := atomiclimit.NewKeyed[string](atomiclimit.PerMinute(60), 60, at)
	hour, _ := atomiclimit.NewKeyedRule[string](atomiclimit.AnchoredWindow(1000, time.Hour), at)
	day, _ := atomiclimit.NewKeyedRule[string](atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 0), at)
	tr, err := httplimit.NewTransport(httplimit.TransportConfig[string]{
		Base: api{}, // the provider, answering 200 at once
		Policies: []atomiclimit.Policy[string]{
			{Name: "minute", Limiter: minute}, {Name: "hour", Limiter: hour}, {Name: "day", Limiter: day},
		},
		MaxWait: 500 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}

	sent, seen := 0, map[string]bool{}
	for m := range 24 * 60 {
		for {
			resp, err := client.Get("https://api.example.com/v1/items")
			if err != nil {
				// The first time each limit stops the client, say so.
				_, why, _ := strings.Cut(err.Error(), "deadline: ")
				if name := strings.Split(why, `"`)[1]; !seen[name] {
					seen[name] = true
					fmt.Printf("%2dh%02dm: %5d sent; %s\n", m/60, m%60, sent, why)
				}
				break
			}
			resp.Body.Close()
			sent++
		}
		clock.Advance(time.Minute)
	}
	fmt.Printf("in 24h: %d sent\n", sent)
	// Output:
	//  0h00m:    60 sent; policy "minute" admits 1 in 1s, beyond the longest wait 500ms
	//  0h16m:  1000 sent; policy "hour" admits 1 in 44m0s, beyond the longest wait 500ms
	//  9h16m: 10000 sent; policy "day" admits 1 in 14h44m0s, beyond the longest wait 500ms
	// in 24h: 10000 sent
}

// api is a provider that answers every call 200 at once.
type api struct{}

func (api) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}
