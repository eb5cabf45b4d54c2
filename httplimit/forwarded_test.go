package httplimit

import (
	"errors"
	"net/netip"
	"testing"
)

// The rules both doors key by: lines are read only from a trusted peer,
// walked from the right, trusted hops skipped; what a client wrote to the
// left of the first untrusted entry never matters. Allocation-free.
func TestResolver(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:172.16.0.0/108")}
	xff, _ := newResolver(IPOptions{TrustedProxies: trusted})
	fwd, _ := newResolver(IPOptions{TrustedProxies: trusted, Header: "Forwarded", IPv6Bits: 48})
	for _, tc := range []struct {
		name  string
		r     *IPResolver
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
		peer, ok := parsePeer(tc.peer)
		if !ok {
			t.Fatalf("%s: parsePeer(%q)", tc.name, tc.peer)
		}
		tr := tc.r.trusts(peer, false)
		var lines []string
		if tr {
			lines = tc.lines
		}
		if got := tc.r.walked(peer, tr, lines); got != netip.MustParsePrefix(tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
	peer, _ := parsePeer("10.1.1.1:443")
	lines := []string{"1.1.1.1, 203.0.113.1, 10.2.2.2"}
	if n := testing.AllocsPerRun(100, func() { xff.walked(peer, true, lines) }); n != 0 {
		t.Errorf("walked: %v allocs, want 0", n)
	}
}

func TestOptionsAndPeers(t *testing.T) {
	for _, o := range []IPOptions{{IPv4Bits: 33}, {IPv6Bits: 129}, {IPv4Bits: -1}, {TrustedProxies: []netip.Prefix{{}}}, {Header: "X-Client-IP"}} {
		if _, err := newResolver(o); err == nil {
			t.Errorf("newResolver(%+v) accepted", o)
		}
	}
	u, _ := newResolver(IPOptions{TrustUnixSocket: true})
	if !u.trusts(netip.IPv6Unspecified(), true) || u.trusts(netip.MustParseAddr("10.0.0.1"), false) {
		t.Error("TrustUnix")
	}
	for s, want := range map[string]bool{"@": true, "": true, "/run/x.sock": true, "127.0.0.1:1": false} {
		if isUnixPeer(s) != want {
			t.Errorf("isUnixPeer(%q) != %v", s, want)
		}
	}
	if a, ok := parsePeer("[::ffff:192.0.2.1]:80"); !ok || a != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("parsePeer mapped: %v %v", a, ok)
	}
	if _, ok := parsePeer("bufconn"); ok {
		t.Error("parsePeer accepted a non-address")
	}
}

// Every form of an address gives the same key in X-Forwarded-For,
// Forwarded and X-Real-IP, from a trusted peer; from an untrusted one no
// field is read. Allocation-free for every form.
func TestFieldsReadFormsAlike(t *testing.T) {
	peer := netip.MustParseAddr(casePeer)
	for _, c := range fieldCases() {
		r, err := newResolver(IPOptions{TrustedProxies: caseTrusted, Header: c.Header})
		if err != nil {
			t.Fatal(err)
		}
		if !r.trusts(peer, false) {
			t.Fatalf("%s is not trusted", peer)
		}
		if got := r.walked(peer, true, c.Lines); got != netip.MustParsePrefix(c.Key) {
			t.Errorf("%s: %s %q: %v, want %s", c.Name, c.Header, c.Lines, got, c.Key)
		}
		if n := testing.AllocsPerRun(10, func() { r.walked(peer, true, c.Lines) }); n != 0 && c.Key != casePeerKey {
			t.Errorf("%s: %s %q: %v allocs, want 0", c.Name, c.Header, c.Lines, n)
		}
		untrusted := netip.MustParseAddr("192.0.2.1")
		if tr := r.trusts(untrusted, false); tr || r.walked(untrusted, tr, nil) != netip.MustParsePrefix("192.0.2.1/32") {
			t.Errorf("%s: the untrusted peer is not the client", c.Header)
		}
	}
}

// IPOptions.Header names a header in any letter case, empty is
// X-Forwarded-For, and any other name is refused.
func TestProxyHeaderNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		want proxyHeader
	}{
		{"", xForwardedFor},
		{"X-Forwarded-For", xForwardedFor},
		{"x-forwarded-for", xForwardedFor},
		{"Forwarded", forwarded},
		{"FORWARDED", forwarded},
		{"X-Real-IP", xRealIP},
		{"x-real-ip", xRealIP},
	} {
		r, err := newResolver(IPOptions{Header: tc.name})
		if err != nil || r.header != tc.want {
			t.Errorf("Header %q: %v, %v; want %s", tc.name, r, err, proxyHeaderNames[tc.want])
		}
	}
	for _, name := range []string{"X-Client-IP", "X-Forwarded-For ", "True-Client-IP", "X-Forwarded"} {
		if _, err := newResolver(IPOptions{Header: name}); err == nil {
			t.Errorf("Header %q accepted", name)
		}
	}
}

// The options are taken as they are: each field where it belongs.
func TestNewResolver(t *testing.T) {
	r, err := newResolver(IPOptions{TrustedProxies: caseTrusted, Header: "X-Real-IP", IPv6Bits: 48, IPv4Bits: 24, TrustUnixSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.header != xRealIP || r.bits6 != 48 || r.bits4 != 24 || !r.unixTrusted || len(r.trusted) != 1 {
		t.Errorf("newResolver: %+v", r)
	}
}

// key reads the lines of a trusted peer only.
func TestResolverKey(t *testing.T) {
	r, _ := newResolver(IPOptions{TrustedProxies: caseTrusted})
	read, fwd := 0, []string{"203.0.113.9"}
	lines := func() []string { read++; return fwd }
	if got := r.key(netip.MustParseAddr("192.0.2.1"), false, lines); got != netip.MustParsePrefix("192.0.2.1/32") || read != 0 {
		t.Errorf("untrusted peer: %v, lines read %d times", got, read)
	}
	if got := r.key(netip.MustParseAddr(casePeer), false, lines); got != netip.MustParsePrefix("203.0.113.9/32") || read != 1 {
		t.Errorf("trusted peer: %v, lines read %d times", got, read)
	}
	if got := r.key(netip.IPv6Unspecified(), true, lines); got != netip.MustParsePrefix("::/64") || read != 1 {
		t.Errorf("unix peer, not trusted: %v, lines read %d times", got, read)
	}
	peer := netip.MustParseAddr(casePeer)
	if n := testing.AllocsPerRun(100, func() { r.key(peer, false, lines) }); n != 0 {
		t.Errorf("key: %v allocs, want 0", n)
	}
}

// IPResolver is ClientIP's rule for another door's peer and field: the
// values are read only from a trusted peer, a mapped or zoned peer is
// normalized, the zero Addr is a unix-socket peer (trusted only with
// TrustUnixSocket), and nothing is allocated. Invalid options are
// ErrConfig.
func TestIPResolver(t *testing.T) {
	res, err := NewIPResolver(IPOptions{TrustedProxies: caseTrusted, Header: "Forwarded"})
	if err != nil {
		t.Fatal(err)
	}
	read, lines := 0, []string{`for="[2001:db8:1:2::9]:443", for=10.9.9.9`}
	values := func() []string { read++; return lines }
	for _, tc := range []struct {
		name, peer string // peer "": the zero Addr
		want       string
		reads      int
	}{
		{"untrusted: the peer", "192.0.2.1", "192.0.2.1/32", 0},
		{"untrusted, mapped: the IPv4 peer", "::ffff:192.0.2.1", "192.0.2.1/32", 0},
		{"untrusted, zoned", "fe80::1%eth0", "fe80::/64", 0},
		{"trusted: the field, from the right", casePeer, "2001:db8:1:2::/64", 1},
		{"trusted, mapped", "::ffff:" + casePeer, "2001:db8:1:2::/64", 1},
		{"unix socket, not trusted: ::", "", "::/64", 0},
	} {
		read = 0
		var peer netip.Addr
		if tc.peer != "" {
			peer = netip.MustParseAddr(tc.peer)
		}
		if got := res.Client(peer, values); got != netip.MustParsePrefix(tc.want) || read != tc.reads {
			t.Errorf("%s: %v, values read %d times; want %s, %d", tc.name, got, read, tc.want, tc.reads)
		}
	}
	unix, _ := NewIPResolver(IPOptions{TrustUnixSocket: true})
	if got := unix.Client(netip.Addr{}, func() []string { return []string{"203.0.113.9"} }); got != netip.MustParsePrefix("203.0.113.9/32") {
		t.Errorf("trusted unix socket: %v", got)
	}
	peer := netip.MustParseAddr(casePeer)
	if n := testing.AllocsPerRun(100, func() { res.Client(peer, values) }); n != 0 {
		t.Errorf("Client: %v allocs, want 0", n)
	}
	if _, err := NewIPResolver(IPOptions{IPv4Bits: 33}); !errors.Is(err, ErrConfig) {
		t.Errorf("invalid options: %v, want ErrConfig", err)
	}
}

// xffEntryBefore is parseXFFEntry as it was before splitAddr, on netip's
// parsers alone: what X-Forwarded-For must go on taking.
func xffEntryBefore(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return normalize(a), true
		}
		return netip.Addr{}, false
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
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
