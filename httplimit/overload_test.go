package httplimit

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// A full key table is the server's overload, not the client's quota: a new
// client gets 503 with the time until the limiter has room as Retry-After,
// the hook hears Overloaded (not Denied), the Denial says
// ErrTooManyKeys, and a client that waits what it was told is served.
func TestFullKeyTableIsOverload(t *testing.T) {
	clk := newFakeClock()
	lim, err := atomiclimit.NewKeyedRule[netip.Prefix](atomiclimit.FixedWindow(1, 5*time.Second),
		atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	hook := newCountingHook()
	var got Denial
	h := mustNew(t, Config[netip.Prefix]{Key: RemoteIP, Hook: hook.hook(),
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "ip", Limiter: lim}},
		Deny:     func(w http.ResponseWriter, r *http.Request, d Denial) { got = d; DefaultDeny(w, r, d) },
	}).Handler(okHandler)

	if w := do(h, "GET", "/", "192.0.2.1:1"); w.Code != http.StatusOK {
		t.Fatalf("first client: %d", w.Code)
	}
	clk.Add(time.Second)
	for try := range 3 {
		w := do(h, "GET", "/", "192.0.2.2:1")
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("try %d: a new client on a full table: %d, want 503", try, w.Code)
		}
		if ra := w.Header().Get("Retry-After"); ra != "4" {
			t.Fatalf("try %d: Retry-After %q, want 4 (the held key is idle in 4s)", try, ra)
		}
		var body struct {
			Status int
			Detail string
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Status != 503 || body.Detail != "too many clients to limit at once; retry after 4 seconds" {
			t.Fatalf("try %d: body %s (%v)", try, w.Body, err)
		}
		if got.Err != atomiclimit.ErrTooManyKeys {
			t.Fatalf("try %d: Denial.Err %v, want ErrTooManyKeys", try, got.Err)
		}
	}
	if hook.overloaded["ip"] != 3 || hook.denied["ip"] != 0 || hook.errors["ip"] != 0 {
		t.Fatalf("hook: overloaded %d, denied %d, errors %d; want 3, 0, 0", hook.overloaded["ip"], hook.denied["ip"], hook.errors["ip"])
	}
	clk.Add(4 * time.Second)
	if w := do(h, "GET", "/", "192.0.2.2:1"); w.Code != http.StatusOK {
		t.Fatalf("after the wait it was told: %d, want 200", w.Code)
	}
}
