// Command grpcdemo starts a gRPC server on 127.0.0.1 behind grpclimit's
// interceptors and drives it with real clients over TCP, then prints, per
// client, the calls admitted beside the bound, and what a denied client
// sees. The server holds each API key to 20 calls per second with bursts
// of 5, and each stream's messages to 50 per second, bursts of 10. The
// clients:
//
//   - greedy: 4 goroutines calling as fast as they can, ignoring denials;
//   - polite: one goroutine that honours RetryInfo (a Pacer with Retries):
//     every call it makes succeeds, and a retry after the delay the server
//     named is never denied;
//   - paced: a Pacer with its own limit a little under the server's, so it
//     waits instead of being denied;
//   - streamer: one stream, messages as fast as it can, until a message is
//     denied.
//
// It exits with status 1 if a key was admitted beyond its bound in any
// window, or the polite client was denied twice in a row.
//
//	go run ./cmd/grpcdemo            # about 2 seconds
//	go run ./cmd/grpcdemo -d 300ms   # quicker
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

const (
	burst = 5
	every = 50 * time.Millisecond // 20 per second
)

// recorder is the server's policy: a Keyed limiter that records when it
// admitted each key's calls, so that the bound can be checked in every
// window afterwards.
type recorder struct {
	*atomiclimit.Keyed[string]
	mu    sync.Mutex
	times map[string][]time.Time
}

func (r *recorder) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	now := time.Now()
	d, _, _ := r.TakeN(key, now, n)
	if d.Allowed {
		r.mu.Lock()
		for range n {
			r.times[key] = append(r.times[key], now)
		}
		r.mu.Unlock()
	}
	return d, atomiclimit.Receipt{}, nil
}

// worst returns the largest excess of admissions over B + d/T in any
// window [t_i, t_j] of key's admissions (≤ 0: the bound holds everywhere).
func (r *recorder) worst(key string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.times[key]
	w := -float64(burst)
	for j := range ts {
		for i := 0; i <= j; i++ {
			w = max(w, float64(j-i+1)-burst-float64(ts[j].Sub(ts[i]))/float64(every))
		}
	}
	return w
}

type tally struct{ sent, ok, denied, other, maxRow atomic.Int64 }

func main() {
	d := flag.Duration("d", 2*time.Second, "how long the clients run")
	flag.Parse()
	if *d <= 0 {
		fmt.Fprintln(os.Stderr, "grpcdemo: -d must be positive")
		os.Exit(2)
	}
	if err := run(*d); err != nil {
		fmt.Fprintln(os.Stderr, "grpcdemo:", err)
		os.Exit(1)
	}
}

func run(d time.Duration) error {
	k, err := atomiclimit.NewKeyed[string](gcra.Every(every), burst)
	if err != nil {
		return err
	}
	rec := &recorder{Keyed: k, times: map[string][]time.Time{}}
	msgs, _ := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(50), 10)
	lim, err := grpclimit.New(grpclimit.Config[string]{
		Key:      grpclimit.APIKey("x-api-key", nil),
		Policies: []atomiclimit.Policy[string]{{Name: "per-key", Limiter: rec}},
		Messages: []atomiclimit.Policy[string]{{Name: "messages", Limiter: msgs}},
	})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
	echo.Register(srv)
	go srv.Serve(lis)
	defer srv.Stop()
	addr := lis.Addr().String()
	fmt.Printf("server on %s: 20 calls/s per API key, bursts of %d; 50 messages/s per stream, bursts of 10\n\n", addr, burst)

	dial := func(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var firstDenial atomic.Pointer[denied]
	tallies := map[string]*tally{"greedy": {}, "polite": {}, "paced": {}}
	var rows []string

	// greedy: 4 goroutines, no pacing, denials ignored.
	plain, err := dial()
	if err != nil {
		return err
	}
	defer plain.Close()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := tallies["greedy"]
			cctx := metadata.AppendToOutgoingContext(ctx, "x-api-key", "greedy")
			for ctx.Err() == nil {
				var hdr metadata.MD
				_, err := echo.CallSay(cctx, plain, "hi", grpc.Header(&hdr))
				count(t, err)
				if status.Code(err) == codes.ResourceExhausted && firstDenial.Load() == nil {
					firstDenial.CompareAndSwap(nil, &denied{err, hdr})
				}
			}
		}()
	}

	// polite: honours RetryInfo; an interceptor below the Pacer counts what
	// goes out.
	retrier, _ := grpclimit.NewPacer(grpclimit.PacerConfig[string]{Retries: 100})
	politeCC, err := dial(grpc.WithChainUnaryInterceptor(retrier.Unary(), counter(tallies["polite"])))
	if err != nil {
		return err
	}
	defer politeCC.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		cctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "polite")
		for ctx.Err() == nil {
			if _, err := echo.CallSay(cctx, politeCC, "hi"); err != nil {
				rows = append(rows, "polite call failed: "+err.Error())
				return
			}
		}
	}()

	// paced: limits itself to 18 per second, bursts of 4.
	self, _ := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(18), 4)
	pacer, _ := grpclimit.NewPacer(grpclimit.PacerConfig[string]{
		Key:      func(context.Context, string) (string, error) { return "self", nil },
		Policies: []atomiclimit.Policy[string]{{Name: "self", Limiter: self}},
	})
	pacedCC, err := dial(grpc.WithChainUnaryInterceptor(pacer.Unary(), counter(tallies["paced"])))
	if err != nil {
		return err
	}
	defer pacedCC.Close()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx := metadata.AppendToOutgoingContext(ctx, "x-api-key", "paced")
			for ctx.Err() == nil {
				echo.CallSay(cctx, pacedCC, "hi")
			}
		}()
	}

	// streamer: one stream, messages as fast as it can.
	var streamed int
	var streamErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		cctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "streamer")
		s, err := plain.NewStream(cctx, echo.ChatDesc, echo.Chat)
		if err != nil {
			streamErr = err
			return
		}
		for {
			if err := s.SendMsg(wrapperspb.String("m")); err != nil {
				streamErr = s.RecvMsg(new(wrapperspb.StringValue))
				return
			}
			if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				streamErr = err
				return
			}
			streamed++
		}
	}()
	wg.Wait()

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tsent\tadmitted\tdenied\tmost denied in a row\tbound B + d/T in every window\t")
	failed := false
	for _, name := range []string{"greedy", "polite", "paced"} {
		t := tallies[name]
		w := rec.worst(name)
		ok := "holds"
		if w > 0 {
			ok, failed = fmt.Sprintf("EXCEEDED by %.2f", w), true
		}
		row := fmt.Sprint(t.maxRow.Load())
		if name == "greedy" {
			row = "-" // not counted: it does not retry
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t\n", name, t.sent.Load(), t.ok.Load(), t.denied.Load(), row, ok)
	}
	tw.Flush()
	for _, name := range []string{"greedy", "polite", "paced"} {
		if n := tallies[name].other.Load(); n > 0 {
			failed = true
			rows = append(rows, fmt.Sprintf("%s: %d calls failed with neither OK nor ResourceExhausted", name, n))
		}
	}
	if tallies["polite"].maxRow.Load() > 1 {
		failed = true
		rows = append(rows, "the polite client was denied twice in a row: a RetryInfo delay was too short")
	}
	fmt.Printf("\nstreamer: %d messages echoed, then %v\n", streamed, status.Code(streamErr))
	if dn := firstDenial.Load(); dn != nil {
		st := status.Convert(dn.err)
		fmt.Printf("\na denied call, as the greedy client sees it:\n  status:  %v %q\n", st.Code(), st.Message())
		for _, det := range st.Details() {
			switch det := det.(type) {
			case *errdetails.RetryInfo:
				fmt.Printf("  RetryInfo:    retry_delay %v\n", det.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				for _, v := range det.GetViolations() {
					fmt.Printf("  QuotaFailure: subject %q, description %q, quota_value %d\n", v.GetSubject(), v.GetDescription(), v.GetQuotaValue())
				}
			}
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range dn.md {
				if strings.HasPrefix(k, "ratelimit") && !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			fmt.Printf("  %s: %s\n", k, strings.Join(dn.md[k], ", "))
		}
	}
	for _, r := range rows {
		fmt.Println(r)
	}
	if failed {
		return fmt.Errorf("a check failed")
	}
	return nil
}

type denied struct {
	err error
	md  metadata.MD
}

// count counts a call's outcome. A call cut by the end of the run
// (DeadlineExceeded, Canceled) is not counted: the server may not have
// seen it.
func count(t *tally, err error) {
	switch status.Code(err) {
	case codes.OK:
		t.ok.Add(1)
	case codes.ResourceExhausted:
		t.denied.Add(1)
	case codes.DeadlineExceeded, codes.Canceled:
		return
	default:
		t.other.Add(1)
	}
	t.sent.Add(1)
}

// counter counts, below a Pacer, each call that goes out, and the longest
// run of denials one call met.
func counter(t *tally) grpc.UnaryClientInterceptor {
	var row atomic.Int64
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		count(t, err)
		if status.Code(err) == codes.ResourceExhausted {
			r := row.Add(1)
			for m := t.maxRow.Load(); r > m && !t.maxRow.CompareAndSwap(m, r); m = t.maxRow.Load() {
			}
		} else {
			row.Store(0)
		}
		return err
	}
}
