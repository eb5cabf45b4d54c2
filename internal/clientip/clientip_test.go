package clientip

import (
	"net/netip"
	"testing"
)

// The rules every door keys by: lines are read only from a trusted peer,
// walked from the right, trusted hops skipped; what a client wrote to the
// left of the first untrusted entry never matters. Allocation-free.
func TestResolver(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:172.16.0.0/108")}
	xff, _ := New(Options{Trusted: trusted})
	fwd, _ := New(Options{Trusted: trusted, Forwarded: true, Bits6: 48})
	for _, tc := range []struct {
		name  string
		r     *Resolver
		peer  string
		lines []string
		want  string
	}{
		{"untrusted peer: lines ignored", xff, "192.0.2.1", []string{"203.0.113.1"}, "192.0.2.1/32"},
		{"trusted peer: rightmost untrusted", xff, "10.1.1.1", []string{"198.51.100.7, 203.0.113.1, 10.2.2.2"}, "203.0.113.1/32"},
		{"a spoof to the left changes nothing", xff, "10.1.1.1", []string{"6.6.6.6, 198.51.100.7, 203.0.113.1"}, "203.0.113.1/32"},
		{"mapped trusted prefix unmapped", xff, "172.16.0.9", []string{"203.0.113.1"}, "203.0.113.1/32"},
		{"garbage: the hop that forwarded it", xff, "10.1.1.1", []string{"203.0.113.1, _hidden"}, "10.1.1.1/32"},
		{"all trusted: the leftmost", xff, "10.1.1.1", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3/32"},
		{"Forwarded, quoted IPv6 with port, /48", fwd, "10.1.1.1", []string{`for="[2001:db8:1:2::1]:443";proto=https`}, "2001:db8:1::/48"},
		{"Forwarded: a quoted comma is not a separator", fwd, "10.1.1.1", []string{`for=203.0.113.1;x="a,b"`}, "203.0.113.1/32"},
	} {
		peer, ok := ParsePeer(tc.peer)
		if !ok {
			t.Fatalf("%s: ParsePeer(%q)", tc.name, tc.peer)
		}
		tr := tc.r.Trusts(peer, false)
		var lines []string
		if tr {
			lines = tc.lines
		}
		if got := tc.r.Client(peer, tr, lines); got != netip.MustParsePrefix(tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
	peer, _ := ParsePeer("10.1.1.1:443")
	lines := []string{"1.1.1.1, 203.0.113.1, 10.2.2.2"}
	if n := testing.AllocsPerRun(100, func() { xff.Client(peer, true, lines) }); n != 0 {
		t.Errorf("Client: %v allocs, want 0", n)
	}
}

func TestOptionsAndPeers(t *testing.T) {
	for _, o := range []Options{{Bits4: 33}, {Bits6: 129}, {Bits4: -1}, {Trusted: []netip.Prefix{{}}}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	u, _ := New(Options{TrustUnix: true})
	if !u.Trusts(netip.IPv6Unspecified(), true) || u.Trusts(netip.MustParseAddr("10.0.0.1"), false) {
		t.Error("TrustUnix")
	}
	for s, want := range map[string]bool{"@": true, "": true, "/run/x.sock": true, "127.0.0.1:1": false} {
		if IsUnixPeer(s) != want {
			t.Errorf("IsUnixPeer(%q) != %v", s, want)
		}
	}
	if a, ok := ParsePeer("[::ffff:192.0.2.1]:80"); !ok || a != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("ParsePeer mapped: %v %v", a, ok)
	}
	if _, ok := ParsePeer("bufconn"); ok {
		t.Error("ParsePeer accepted a non-address")
	}
}
