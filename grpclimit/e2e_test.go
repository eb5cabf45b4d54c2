package grpclimit

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// recordingLimiter decides on a real Keyed limiter at times it reads itself,
// and records the time of every admission: the exact instants the GCRA
// bound is stated in.
type recordingLimiter struct {
	k        *atomiclimit.Keyed[string]
	mu       sync.Mutex
	admitted map[string][]time.Duration // since start
	start    time.Time
}

func newRecording(k *atomiclimit.Keyed[string]) *recordingLimiter {
	return &recordingLimiter{k: k, admitted: map[string][]time.Duration{}, start: time.Now()}
}

func (l *recordingLimiter) Take(_ context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	now := time.Now()
	d, _, _ := l.k.TakeN(key, now, n)
	if d.Allowed {
		l.mu.Lock()
		l.admitted[key] = append(l.admitted[key], now.Sub(l.start))
		l.mu.Unlock()
	}
	return d, atomiclimit.Receipt{}, nil
}

func (l *recordingLimiter) Peek(_ context.Context, key string, n int) (gcra.Decision, error) {
	return l.k.PeekN(key, time.Now(), n), nil
}

func (l *recordingLimiter) Refund(context.Context, string, int, atomiclimit.Receipt) (bool, error) {
	return false, nil
}

func (l *recordingLimiter) Quota(key string) atomiclimit.Quota { return l.k.Quota(key) }

// checkBound asserts that the admissions of every key keep the GCRA bound
// in every window: over every interval [t_i, t_j] of admissions,
// j−i+1 ≤ B + (t_j−t_i)/T.
func checkBound(t *testing.T, l *recordingLimiter, burst int64, T time.Duration) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, times := range l.admitted {
		slices.Sort(times)
		for j := range times {
			for i := 0; i < j; i++ {
				if count := int64(j - i + 1); (count-burst)*int64(T) > int64(times[j]-times[i]) {
					t.Fatalf("%s: %d admissions in [%v, %v] > B + d/T = %.2f", key, count, times[i], times[j],
						float64(burst)+float64(times[j]-times[i])/float64(T))
				}
			}
		}
	}
}

// attempts counts, below a Pacer, the calls that went out and how each
// ended.
type attempts struct {
	mu             sync.Mutex
	sent, denied   int
	deniedInARow   int // the most consecutive denials
	row            int
	otherFailures  []error
	retryDelaysSum time.Duration
}

func (a *attempts) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent++
	switch status.Code(err) {
	case codes.OK:
		a.row = 0
	case codes.ResourceExhausted:
		a.denied++
		a.row++
		a.deniedInARow = max(a.deniedInARow, a.row)
		d, _ := RetryDelay(err)
		a.retryDelaysSum += d
	default:
		a.otherFailures = append(a.otherFailures, err)
	}
	return err
}

// Real traffic on TCP loopback: greedy clients on three API keys, many
// goroutines each, and one client on a key of its own that honours
// RetryInfo (a Pacer with Retries). Per key the GCRA bound holds over every
// window of the admissions; every greedy key is denied at times; and the
// polite client is never denied twice in a row: a retry sent after the
// delay RetryInfo named is admitted, so the delay is never short.
func TestEndToEndRealTraffic(t *testing.T) {
	const burst, workers = 4, 12
	T := 20 * time.Millisecond
	run := 600 * time.Millisecond
	if testing.Short() {
		run = 200 * time.Millisecond
	}
	k, err := atomiclimit.NewKeyed[string](gcra.Every(T), burst, atomiclimit.WithSweepInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	lim := newRecording(k)
	m := mustNew(t, Config[string]{Key: APIKey("x-api-key", nil), Policies: []atomiclimit.Policy[string]{{Name: "e2e", Limiter: lim}}})
	greedyCC := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())})
	pacer, err := NewPacer(PacerConfig[string]{Retries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var polite attempts
	politeCC, err := grpc.NewClient(greedyCC.Target(), grpc.WithTransportCredentials(insecureCreds()),
		grpc.WithChainUnaryInterceptor(pacer.Unary(), polite.interceptor))
	if err != nil {
		t.Fatal(err)
	}
	defer politeCC.Close()

	keys := []string{"k1", "k2", "k3"}
	type tally struct{ ok, denied, other int }
	var mu sync.Mutex
	tallies := map[string]*tally{"k1": {}, "k2": {}, "k3": {}}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := keys[w%len(keys)]
			cctx := metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
			for ctx.Err() == nil {
				_, err := echo.CallSay(cctx, greedyCC, "hi")
				mu.Lock()
				switch status.Code(err) {
				case codes.OK:
					tallies[key].ok++
				case codes.ResourceExhausted:
					if _, ok := RetryDelay(err); !ok {
						tallies[key].other++ // a denial without RetryInfo
					}
					tallies[key].denied++
				case codes.DeadlineExceeded, codes.Canceled:
				default:
					tallies[key].other++
				}
				mu.Unlock()
			}
		}()
	}
	politeCalls := 0
	pctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "polite")
	for ctx.Err() == nil {
		if _, err := echo.CallSay(pctx, politeCC, "hi"); err != nil {
			t.Fatalf("polite call %d: %v", politeCalls, err)
		}
		politeCalls++
	}
	wg.Wait()
	elapsed := time.Since(lim.start)

	checkBound(t, lim, burst, T)
	for _, key := range keys {
		tl := tallies[key]
		t.Logf("%s: %d admitted, %d denied in %v (B + elapsed/T = %d)", key, tl.ok, tl.denied, elapsed.Round(time.Millisecond), burst+int(elapsed/T))
		if tl.denied == 0 || tl.other != 0 {
			t.Errorf("%s: %d denied, %d other outcomes: the bound was not reached, or a denial lacked RetryInfo", key, tl.denied, tl.other)
		}
		if tl.ok > burst+int(elapsed/T) {
			t.Errorf("%s: %d admitted in %v > B + elapsed/T", key, tl.ok, elapsed)
		}
	}
	polite.mu.Lock()
	defer polite.mu.Unlock()
	t.Logf("polite: %d calls, %d sent, %d denied, at most %d denied in a row; waited %v as told", politeCalls, polite.sent, polite.denied, polite.deniedInARow, polite.retryDelaysSum)
	if polite.denied == 0 || polite.deniedInARow != 1 || polite.sent != politeCalls+polite.denied || len(polite.otherFailures) > 0 {
		t.Errorf("polite client: %d denied, %d in a row (want 1: a retry after RetryInfo is admitted), %d sent for %d calls, failures %v",
			polite.denied, polite.deniedInARow, polite.sent, politeCalls, polite.otherFailures)
	}
	if n := len(lim.admitted["polite"]); n != politeCalls {
		t.Errorf("polite: %d admissions for %d calls", n, politeCalls)
	}
}
