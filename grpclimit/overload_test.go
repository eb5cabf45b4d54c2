package grpclimit

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// A full key table is the server's overload, not the client's quota: a new
// client's call fails Unavailable with a RetryInfo of the time until the
// limiter has room, errors.Is matches ErrTooManyKeys, and the hook hears
// Overloaded, not Denied.
func TestFullKeyTableIsUnavailable(t *testing.T) {
	c := newFakeClock()
	lim, err := atomiclimit.NewKeyedRule[netip.Prefix](atomiclimit.FixedWindow(1, 5*time.Second),
		atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	h := newCountingHook()
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Hook: h.hook(), Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "ip", Limiter: lim}}})
	if err := unary(m, callCtxOnly("192.0.2.1:1"), echo.Say); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	err = unary(m, callCtxOnly("192.0.2.2:1"), echo.Say)
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.HasPrefix(st.Message(), "grpclimit: too many clients to limit at once") {
		t.Fatalf("status %v %q, want Unavailable", st.Code(), st.Message())
	}
	if d, ok := RetryDelay(err); !ok || d != 4*time.Second {
		t.Fatalf("RetryInfo %v %v, want 4s: the held key is idle then", d, ok)
	}
	if !errors.Is(err, atomiclimit.ErrTooManyKeys) {
		t.Fatalf("errors.Is(%v, ErrTooManyKeys) = false", err)
	}
	if h.overloaded["ip"] != 1 || h.denied["ip"] != 0 || h.error["ip"] != 0 {
		t.Fatalf("hook: overloaded %d, denied %d, errors %d", h.overloaded["ip"], h.denied["ip"], h.error["ip"])
	}
	c.Add(4 * time.Second)
	if err := unary(m, callCtxOnly("192.0.2.2:1"), echo.Say); err != nil {
		t.Fatalf("after the wait it was told: %v", err)
	}
}
