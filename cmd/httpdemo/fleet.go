package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// Story (c): a hard limit that a fleet shares. Three server processes (this
// binary, started again with serveFleetFlag), each with its own Redis client
// and redislimit.Limiter with the same limit and key prefix on one Redis,
// behind the middleware; clients send their requests round-robin across
// them, as a load balancer would.

// The fleet's limit: 10 per second per API key, burst 1 (no burst at all).
var (
	fleetLimit = gcra.Per(10, time.Second)
	fleetBurst = 1
)

const (
	fleetProcesses = 3
	fleetWorkers   = 6 // concurrent clients, each round-robin over the processes
	fleetKey       = "team-a"
	// serveFleetFlag, first on the command line, makes the binary a fleet
	// process: it is not one of the demo's own flags (-h does not list it).
	serveFleetFlag = "-serve-fleet"
	// readyLine starts the one line a fleet process writes to its stdout,
	// with the address it listens on.
	readyLine = "listening on "
)

// serveFleet is a fleet process: args are serveFleetFlag's, the Redis
// address and -prefix. It serves until its stdin ends: the parent closes
// it to stop the process, and the pipe also closes if the parent dies, so
// that no process outlives the demo.
func serveFleet(args []string) error {
	fs := flag.NewFlagSet("serve-fleet", flag.ContinueOnError)
	addr := fs.String(serveFleetFlag[1:], "", "the Redis address")
	prefix := fs.String("prefix", "", "the key prefix, the same for every process of the fleet")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Fail fast, and let the outage policy (FailClosed: 503) answer.
	rdb := redis.NewClient(&redis.Options{Addr: *addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	lim, err := redislimit.New(rdb, fleetLimit, fleetBurst,
		redislimit.WithKeyPrefix(*prefix), redislimit.WithTimeout(time.Second)) // FailClosed: a hard limit
	if err != nil {
		return err
	}
	mw, err := httplimit.New(httplimit.Config[string]{
		Key:      httplimit.Header("X-API-Key"),
		Policies: []atomiclimit.Policy[string]{{Name: "fleet", Limiter: lim}},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })),
		ReadHeaderTimeout: 5 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("%s%s\n", readyLine, ln.Addr())
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case err := <-served:
		return err
	case <-stdinClosed:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// quietLogger silences go-redis's own log of failed dials: the demo reports
// what fails itself (the ping's error, the processes' 503s).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// A fleetProc is a fleet process as the demo sees it.
type fleetProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string

	tally
}

// stop ends the process: first it closes its stdin (the process shuts its
// server down and exits), then it kills it if it has not exited within 5s.
func (p *fleetProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// startFleetProc starts this binary as a fleet process and waits, up to
// 10s, for the line that says where it listens.
func startFleetProc(ctx context.Context, exe, redisAddr, prefix string) (*fleetProc, error) {
	cmd := exec.Command(exe, serveFleetFlag, redisAddr, "-prefix", prefix)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &fleetProc{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if a, ok := strings.CutPrefix(strings.TrimSpace(s), readyLine); ok {
			p.addr = a
			return p, nil
		}
		err = fmt.Errorf("fleet process %d did not start (it wrote %q)", cmd.Process.Pid, s)
	case <-time.After(10 * time.Second):
		err = fmt.Errorf("fleet process %d did not start within 10s", cmd.Process.Pid)
	case <-ctx.Done():
		err = errInterrupted
	}
	p.stop()
	return nil, err
}

// A redisServer is the redis-server the demo started.
type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	addr string
}

// startRedis starts bin on a free loopback port, in a temporary directory,
// with persistence off, and waits, up to 10s, until it answers PING.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "httpdemo-redis")
	if err != nil {
		return nil, err
	}
	s := &redisServer{dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			s.stop()
			return nil, errInterrupted
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not start: %w", s.addr, err)
		}
		time.Sleep(5 * time.Millisecond) // polling the new process: nothing else to wait on
	}
}

// stop kills the server and removes its directory.
func (s *redisServer) stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	os.RemoveAll(s.dir)
}

// errInterrupted: the demo was interrupted (SIGINT, SIGTERM); the fleet's
// processes are stopped.
var errInterrupted = errors.New("interrupted; the fleet's processes are stopped")

// runFleet plays story (c) for d against the Redis at redisAddr, or, if it
// is empty, a redis-server it starts; without one it says so and returns
// nil. Whatever happens, it stops every process it started before it
// returns. It fails if the fleet admitted more than the limit allows.
func runFleet(ctx context.Context, d time.Duration, redisAddr string) error {
	fmt.Println("\n--- story (c): a hard limit that three server processes share through Redis")
	if redisAddr == "" {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			fmt.Println("fleet part skipped: redis-server is not on PATH (install it: apt-get install redis-server), or pass -redis host:port")
			return nil
		}
		rs, err := startRedis(ctx, bin)
		if err != nil {
			return err
		}
		defer rs.stop()
		redisAddr = rs.addr
		fmt.Printf("redis-server on %s, started for the demo (persistence off)\n", redisAddr)
	} else {
		c := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1, DialerRetries: 1})
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		c.Close()
		if err != nil {
			return fmt.Errorf("no Redis at %s: %w", redisAddr, err)
		}
		fmt.Printf("Redis at %s\n", redisAddr)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// Keys of this run's own, should the Redis hold an earlier run's.
	prefix := fmt.Sprintf("httpdemo:%d:", time.Now().UnixNano())
	var procs []*fleetProc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for range fleetProcesses {
		p, err := startFleetProc(ctx, exe, redisAddr, prefix)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	params, _ := gcra.NewParams(fleetLimit, fleetBurst) // valid: the limit is a constant
	fmt.Printf("%d processes (this binary, %s), each with its own Redis client and redislimit.Limiter:\n", len(procs), serveFleetFlag)
	fmt.Printf("  per API key, %q %v burst %d, decided in Redis; %d clients of key %q, round-robin\n\n",
		"fleet", fleetLimit, fleetBurst, fleetWorkers, fleetKey)

	transport := &http.Transport{MaxIdleConnsPerHost: fleetWorkers}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	dctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range fleetWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; dctx.Err() == nil; i++ {
				procs[i%len(procs)].send(dctx, hc, fleetKey)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		return errInterrupted
	}

	var sent, admitted, denied, other int64
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "process\tpid\taddress\tsent\tadmitted\tdenied\tother\tbound\t\n")
	for i, p := range procs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%d\t%d\t\t\n", i+1, p.cmd.Process.Pid, p.addr, p.sent.Load(), p.ok.Load(), p.denied.Load(), p.other.Load())
		sent, admitted, denied, other = sent+p.sent.Load(), admitted+p.ok.Load(), denied+p.denied.Load(), other+p.other.Load()
	}
	// The fleet admits at most B + span/T, GCRA's bound, where span is the
	// time on Redis TIME from the first admission to the last: both fall
	// within the elapsed time measured here, so span ≤ elapsed.
	bound := int64(fleetBurst) + int64(elapsed/params.Interval())
	fmt.Fprintf(tw, "fleet\t\t\t%d\t%d\t%d\t%d\t%d\t\n", sent, admitted, denied, other, bound)
	tw.Flush()
	fmt.Printf("\nran %v; bound: the most the limit admits in that time, burst + elapsed/T = %d + %v/%v.\n"+
		"Three limits of their own would have admitted up to three times that; sharing one bucket per\n"+
		"key in Redis, the three processes together stay within it.\n",
		elapsed.Round(time.Millisecond), fleetBurst, elapsed.Round(time.Millisecond), params.Interval())

	fmt.Println("\n--- what a fresh key sees, one request on each process in turn")
	for i, p := range procs {
		resp, err := p.get(ctx, hc, "team-b")
		if err != nil {
			return err
		}
		fmt.Printf("process %d: %s", i+1, resp.Status)
		for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := resp.Header.Get(h); v != "" {
				fmt.Printf(" %s: %s", h, v)
			}
		}
		fmt.Println()
	}

	switch {
	case admitted > bound:
		return fmt.Errorf("the fleet admitted %d, above the bound %d", admitted, bound)
	case admitted == 0:
		return errors.New("the fleet admitted nothing")
	}
	return nil
}

// get sends GET / to the process as the client of an API key.
func (p *fleetProc) get(ctx context.Context, hc *http.Client, key string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+p.addr+"/", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// send is get, counted in the process's tallies. A request cut short by the
// end of the run is not counted.
func (p *fleetProc) send(ctx context.Context, hc *http.Client, key string) {
	resp, err := p.get(ctx, hc, key)
	if err != nil {
		if ctx.Err() == nil {
			p.other.Add(1)
		}
		return
	}
	p.count(resp.StatusCode)
}
