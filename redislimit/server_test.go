package redislimit_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
)

// The tests run against real redis-server processes they start themselves,
// on free loopback ports, with persistence off. Without the binary they skip,
// unless REDISLIMIT_REQUIRE_SERVER is set (ci.sh sets it), when they fail.

// server is a redis-server started by this test binary.
type server struct {
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// redisBinary returns the path of redis-server, or skips (fails in CI).
func redisBinary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found in PATH; install it (apt-get install -y redis-server) to run the Redis tests"
		if os.Getenv("REDISLIMIT_REQUIRE_SERVER") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// startServer starts a redis-server on a free loopback port and stops it
// when the test ends. extra are further redis-server arguments.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	s, err := newServer(redisBinary(t), t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

func newServer(bin, dir string, extra ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &server{port: port, dir: dir}
	s.args = append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "no", "--loglevel", "warning",
	}, extra...)
	return s, s.start(bin)
}

func (s *server) start(bin string) error {
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		return err
	}
	// Wait until it answers PING (readiness, not synchronisation of the
	// code under test).
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on port %d did not start: %v", s.port, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// kill stops the server at once (SIGKILL: a crash, not a shutdown).
func (s *server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// restart starts the server again on the same port, empty (no persistence,
// so its keys and its script cache are gone).
func (s *server) restart(t testing.TB) {
	t.Helper()
	if err := s.start(redisBinary(t)); err != nil {
		t.Fatal(err)
	}
}

// client returns a new client of the server, closed when the test ends.
// MaxRetries is off so that an outage shows at once; tune sets the rest.
func (s *server) client(t testing.TB, tune ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1}
	for _, f := range tune {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// The shared server serves the tests that need no outage; TestMain stops it.
var (
	sharedOnce sync.Once
	shared     *server
	sharedErr  error
	sharedDir  string
)

func sharedServer(t testing.TB) *server {
	t.Helper()
	startShared(redisBinary(t))
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func startShared(bin string) {
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "redislimit-test")
		if sharedErr == nil {
			shared, sharedErr = newServer(bin, sharedDir)
		}
	})
}

// exampleRedis is the address of the shared server, for the examples that
// need a Redis (an example cannot take a testing.TB); TestMain sets it.
var exampleRedis string

// redisExamples are the examples that need a Redis: without redis-server
// they are skipped, as the tests are.
const redisExamples = "^(Example_fleet|Example_fleetTransport|ExampleLeased|ExampleNewKeyed)$"

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the outage tests make many on purpose.
	redis.SetLogger(quietLogger{})
	flag.Parse()
	if bin, err := exec.LookPath("redis-server"); err == nil {
		startShared(bin)
		if sharedErr == nil {
			exampleRedis = shared.addr()
		} // else every test that needs the shared server fails, and says why
	} else if os.Getenv("REDISLIMIT_REQUIRE_SERVER") == "" {
		skip := flag.Lookup("test.skip").Value
		pattern := redisExamples
		if old := skip.String(); old != "" {
			pattern = old + "|" + pattern
		}
		skip.Set(pattern)
		fmt.Fprintln(os.Stderr, "redislimit: redis-server not found in PATH: the Redis tests and examples skip (apt-get install -y redis-server)")
	}
	code := m.Run()
	if shared != nil {
		shared.kill()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// commandCalls returns how many times the server has run cmd (lower case,
// e.g. "set", "evalsha"), scripts' inner calls included, from INFO
// commandstats.
func commandCalls(t testing.TB, c *redis.Client, cmd string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// countingScripter counts the script calls that reach Redis.
type countingScripter struct {
	*redis.Client
	mu    sync.Mutex
	calls int
}

func (c *countingScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *countingScripter) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Client.Eval(ctx, src, keys, args...)
}

func (c *countingScripter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var prefixSeq atomic.Int64

// uniq returns a key prefix no other test, and no other run of this test
// (-count), uses on the shared server.
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s:%d:", t.Name(), prefixSeq.Add(1))
}

// peekLocal is an in-process limiter's Peek decision alone.
func peekLocal[K comparable](k *atomiclimit.Keyed[K], key K, n int) atomiclimit.Decision {
	d, _ := k.Peek(context.Background(), key, n)
	return d
}

// takeLocal is an in-process limiter's Take decision alone.
func takeLocal[K comparable](k *atomiclimit.Keyed[K], key K, n int) atomiclimit.Decision {
	d, _, _ := k.Take(context.Background(), key, n)
	return d
}
