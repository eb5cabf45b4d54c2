package clientip

import (
	"net/netip"
	"testing"

	"github.com/atomiclimit/atomiclimit/internal/clientip/iptest"
)

// The rules every door keys by: lines are read only from a trusted peer,
// walked from the right, trusted hops skipped; what a client wrote to the
// left of the first untrusted entry never matters. Allocation-free.
func TestResolver(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:172.16.0.0/108")}
	xff, _ := New(Options{Trusted: trusted})
	fwd, _ := New(Options{Trusted: trusted, Field: Forwarded, Bits6: 48})
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

// Every form of an address gives the same key in X-Forwarded-For,
// Forwarded and X-Real-IP, from a trusted peer; from an untrusted one no
// field is read. Allocation-free for every form.
func TestFieldsReadFormsAlike(t *testing.T) {
	fields := map[string]Field{}
	for _, f := range []Field{XForwardedFor, Forwarded, XRealIP} {
		fields[f.String()] = f
	}
	peer := netip.MustParseAddr(iptest.Peer)
	for _, c := range iptest.Cases() {
		r, err := New(Options{Trusted: iptest.Trusted, Field: fields[c.Field]})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Trusts(peer, false) {
			t.Fatalf("%s is not trusted", peer)
		}
		if got := r.Client(peer, true, c.Lines); got != netip.MustParsePrefix(c.Key) {
			t.Errorf("%s: %s %q: %v, want %s", c.Name, c.Field, c.Lines, got, c.Key)
		}
		if n := testing.AllocsPerRun(10, func() { r.Client(peer, true, c.Lines) }); n != 0 && c.Key != iptest.PeerKey {
			t.Errorf("%s: %s %q: %v allocs, want 0", c.Name, c.Field, c.Lines, n)
		}
		untrusted := netip.MustParseAddr("192.0.2.1")
		if tr := r.Trusts(untrusted, false); tr || r.Client(untrusted, tr, nil) != netip.MustParsePrefix("192.0.2.1/32") {
			t.Errorf("%s: the untrusted peer is not the client", c.Field)
		}
	}
}

func TestFieldNames(t *testing.T) {
	for _, tc := range []struct {
		f         Field
		name, key string
	}{
		{XForwardedFor, "X-Forwarded-For", "x-forwarded-for"},
		{Forwarded, "Forwarded", "forwarded"},
		{XRealIP, "X-Real-IP", "x-real-ip"},
		{3, "ProxyHeader(3)", "ProxyHeader(3)"},
	} {
		if tc.f.String() != tc.name || tc.f.Key() != tc.key || tc.f.Valid() != (tc.f < 3) {
			t.Errorf("Field(%d): %q %q %v", tc.f, tc.f.String(), tc.f.Key(), tc.f.Valid())
		}
	}
	if _, err := New(Options{Field: 3}); err == nil {
		t.Error("New accepted an unknown field")
	}
}

// A door's options are taken as they are: each field where it belongs.
func TestNewFor(t *testing.T) {
	type header uint8
	type ipOptions struct {
		TrustedProxies  []netip.Prefix
		Header          header
		IPv6Bits        int
		IPv4Bits        int
		TrustUnixSocket bool
	}
	r, err := NewFor(ipOptions{TrustedProxies: iptest.Trusted, Header: header(XRealIP), IPv6Bits: 48, IPv4Bits: 24, TrustUnixSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.field != XRealIP || r.bits6 != 48 || r.bits4 != 24 || !r.unixTrusted || len(r.trusted) != 1 {
		t.Errorf("NewFor: %+v", r)
	}
	if _, err := NewFor(ipOptions{Header: 3}); err == nil {
		t.Error("NewFor accepted an unknown header")
	}
}

// Key reads the lines of a trusted peer only.
func TestKey(t *testing.T) {
	r, _ := New(Options{Trusted: iptest.Trusted})
	read, fwd := 0, []string{"203.0.113.9"}
	lines := func() []string { read++; return fwd }
	if got := r.Key(netip.MustParseAddr("192.0.2.1"), false, lines); got != netip.MustParsePrefix("192.0.2.1/32") || read != 0 {
		t.Errorf("untrusted peer: %v, lines read %d times", got, read)
	}
	if got := r.Key(netip.MustParseAddr(iptest.Peer), false, lines); got != netip.MustParsePrefix("203.0.113.9/32") || read != 1 {
		t.Errorf("trusted peer: %v, lines read %d times", got, read)
	}
	if got := r.Key(netip.IPv6Unspecified(), true, lines); got != netip.MustParsePrefix("::/64") || read != 1 {
		t.Errorf("unix peer, not trusted: %v, lines read %d times", got, read)
	}
	peer := netip.MustParseAddr(iptest.Peer)
	if n := testing.AllocsPerRun(100, func() { r.Key(peer, false, lines) }); n != 0 {
		t.Errorf("Key: %v allocs, want 0", n)
	}
}

// xffEntryBefore is parseXFFEntry as it was before splitAddr, on netip's
// parsers alone: what X-Forwarded-For must go on taking.
func xffEntryBefore(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return Normalize(a), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return Normalize(a), true
		}
		return netip.Addr{}, false
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Normalize(ap.Addr()), true
	}
	return netip.Addr{}, false
}

var entrySeeds = []string{
	"192.0.2.1", "192.0.2.1:80", "192.0.2.1:", "192.0.2.1:65536", "192.0.2.1:000080", "192.0.2.1:+80",
	"2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:443", "[2001:db8::1]:99999", "[2001:db8::1]:_p1",
	"fe80::1%eth0", "[fe80::1%eth0]", "[fe80::1%eth0]:1", "fe80::1%eth0:80", "::ffff:1.2.3.4",
	"[::ffff:1.2.3.4]:80", "[1.2.3.4]", "[1.2.3.4]:80", "[]", "[", "]", "[::1]]", "[::1]:5]:80",
	"1.2.3.4::80", "1.2.3.4%x:80", "[::%]]:0", "[::%]]", "unknown", "_hidden", "", ":", "::", "[::]:0",
}

// X-Forwarded-For takes exactly what it took before splitAddr; a Forwarded
// node takes the same addresses, and reads them alike: the two differ only
// on ports (RFC 7239's 1 to 5 digits or an obfuscated port, netip's 0 to
// 65535).
func FuzzEntries(f *testing.F) {
	for _, s := range entrySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, xok := parseXFFEntry(s)
		if b, bok := xffEntryBefore(s); x != b || xok != bok {
			t.Fatalf("parseXFFEntry(%q) = %v %v, before %v %v", s, x, xok, b, bok)
		}
		n, nok := parseNode(s)
		_, port, split := splitAddr(s)
		portsDiffer := split && port != "" && validPort(port) != validNodePort(port)
		if xok && nok && x != n || xok != nok && !portsDiffer {
			t.Fatalf("%q: X-Forwarded-For %v %v, Forwarded %v %v", s, x, xok, n, nok)
		}
	})
}

// The IPv4 peer's own path (issue 25) accepts only what
// netip.ParseAddrPort accepts, and gives the same address.
func FuzzParsePeer4(f *testing.F) {
	for _, s := range []string{"203.0.113.9:4711", "1.2.3.4:0", "1.2.3.4:65535", "1.2.3.4:65536", "1.2.3.4:00080",
		"01.2.3.4:1", "0.0.0.0:1", "255.255.255.255:1", "256.1.1.1:1", "1.2.3:1", "1.2.3.4.5:1", "1.2.3.4:", "1.2.3.4",
		"1.2.3.4:+1", "1.2.3.4:1_0", "1..3.4:1", "1.2.3.4 :1", "[1.2.3.4]:1", "1.2.3.4:1:2", "1234.1.1.1:1", "::1:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parsePeer4(s)
		ap, err := netip.ParseAddrPort(s)
		if ok && (err != nil || ap.Addr() != a) {
			t.Fatalf("parsePeer4(%q) = %v; netip.ParseAddrPort: %v, %v", s, a, ap, err)
		}
		if !ok && err == nil && ap.Addr().Is4() {
			t.Fatalf("parsePeer4(%q) refused what netip.ParseAddrPort takes: %v", s, ap)
		}
	})
}
