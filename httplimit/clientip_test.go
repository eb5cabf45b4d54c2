package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

type ipCase struct {
	name   string
	remote string
	xff    []string // X-Forwarded-For lines
	fwd    []string // Forwarded lines
	want   string   // the key prefix
}

func runIPCases(t *testing.T, o IPOptions, cases []ipCase) {
	t.Helper()
	key, err := ClientIP(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		for _, v := range tc.fwd {
			r.Header.Add("Forwarded", v)
		}
		got, err := key(r)
		if err != nil {
			t.Errorf("%s: key error %v", tc.name, err)
			continue
		}
		if want := netip.MustParsePrefix(tc.want); got != want {
			t.Errorf("%s: key = %v, want %v", tc.name, got, want)
		}
	}
}

var proxies = []netip.Prefix{mustPrefix("10.0.0.0/8"), mustPrefix("2001:db8:ffff::/48")}

func TestClientIPNoTrustedProxies(t *testing.T) {
	runIPCases(t, IPOptions{}, []ipCase{
		{"plain IPv4", "203.0.113.9:1234", nil, nil, "203.0.113.9/32"},
		{"spoofed XFF ignored", "203.0.113.9:1234", []string{"1.2.3.4"}, nil, "203.0.113.9/32"},
		{"spoofed Forwarded ignored", "203.0.113.9:1234", nil, []string{"for=1.2.3.4"}, "203.0.113.9/32"},
		{"spoofed XFF naming a proxy ignored", "203.0.113.9:1234", []string{"10.0.0.1"}, nil, "203.0.113.9/32"},
		{"IPv6 grouped by /64", "[2001:db8:1:2:3:4:5:6]:80", nil, nil, "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6 is the IPv4 client", "[::ffff:192.0.2.1]:80", nil, nil, "192.0.2.1/32"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, nil, "fe80::/64"},
		{"no port", "192.0.2.1", nil, nil, "192.0.2.1/32"},
	})
}

func TestClientIPUntrustedPeerCannotSpoof(t *testing.T) {
	// The peer is not a proxy: whatever it sends, the key is the peer.
	runIPCases(t, IPOptions{TrustedProxies: proxies}, []ipCase{
		{"XFF", "203.0.113.9:1", []string{"198.51.100.1"}, nil, "203.0.113.9/32"},
		{"XFF chain through a trusted address", "203.0.113.9:1", []string{"198.51.100.1, 10.0.0.1"}, nil, "203.0.113.9/32"},
		{"several XFF lines", "203.0.113.9:1", []string{"198.51.100.1", "10.0.0.2"}, nil, "203.0.113.9/32"},
		{"Forwarded is not even the configured header", "203.0.113.9:1", nil, []string{"for=198.51.100.1"}, "203.0.113.9/32"},
		{"IPv6 peer", "[2001:db8:1::5]:1", []string{"198.51.100.1"}, nil, "2001:db8:1::/64"},
	})
}

func TestClientIPTrustedXFF(t *testing.T) {
	runIPCases(t, IPOptions{TrustedProxies: proxies}, []ipCase{
		{"one proxy", "10.0.0.1:1", []string{"203.0.113.9"}, nil, "203.0.113.9/32"},
		{"spoofed leftmost entries", "10.0.0.1:1", []string{"1.1.1.1, 8.8.8.8, 203.0.113.9"}, nil, "203.0.113.9/32"},
		{"spoofed entry naming a trusted proxy", "10.0.0.1:1", []string{"10.0.0.7, 203.0.113.9"}, nil, "203.0.113.9/32"},
		{"chain of trusted proxies skipped", "10.0.0.1:1", []string{"1.1.1.1, 203.0.113.9, 10.0.0.3, 10.0.0.2"}, nil, "203.0.113.9/32"},
		{"lines walked last to first", "10.0.0.1:1", []string{"1.1.1.1", "203.0.113.9, 10.0.0.3", "10.0.0.2"}, nil, "203.0.113.9/32"},
		{"spoof in an earlier line", "10.0.0.1:1", []string{"1.1.1.1, 2.2.2.2", "203.0.113.9"}, nil, "203.0.113.9/32"},
		{"no header: the proxy itself", "10.0.0.1:1", nil, nil, "10.0.0.1/32"},
		{"all entries trusted: the leftmost", "10.0.0.1:1", []string{"10.0.0.5, 10.0.0.3"}, nil, "10.0.0.5/32"},
		{"empty elements skipped", "10.0.0.1:1", []string{"203.0.113.9,, ,"}, nil, "203.0.113.9/32"},
		{"entry with port", "10.0.0.1:1", []string{"203.0.113.9:4711"}, nil, "203.0.113.9/32"},
		{"IPv6 entry", "10.0.0.1:1", []string{"2001:db8:1:2:3::9"}, nil, "2001:db8:1:2::/64"},
		{"bracketed IPv6 entry with port", "10.0.0.1:1", []string{"[2001:db8:1:2::9]:443"}, nil, "2001:db8:1:2::/64"},
		// Bracketed without a port: unambiguous, accepted (before, such a
		// client fell back to the proxy's key, one bucket for all of them).
		{"bracketed IPv6 entry without port", "10.0.0.1:1", []string{"[2001:db8:1:2::9]"}, nil, "2001:db8:1:2::/64"},
		{"bracketed IPv4 entry is malformed", "10.0.0.1:1", []string{"[203.0.113.9]"}, nil, "10.0.0.1/32"},
		{"empty brackets are malformed", "10.0.0.1:1", []string{"[]"}, nil, "10.0.0.1/32"},
		{"IPv4-mapped entry", "10.0.0.1:1", []string{"::ffff:203.0.113.9"}, nil, "203.0.113.9/32"},
		{"IPv6 proxy", "[2001:db8:ffff::1]:1", []string{"203.0.113.9"}, nil, "203.0.113.9/32"},
		{"proxy via IPv4-mapped address", "[::ffff:10.0.0.1]:1", []string{"203.0.113.9"}, nil, "203.0.113.9/32"},
		{"Forwarded ignored when XFF is configured", "10.0.0.1:1", nil, []string{"for=203.0.113.9"}, "10.0.0.1/32"},
		// Malformed entries: never reached when an untrusted entry lies to
		// their right; otherwise the key is the trusted hop that sent them.
		{"garbage left of the client", "10.0.0.1:1", []string{"garbage, <script>, 203.0.113.9"}, nil, "203.0.113.9/32"},
		{"garbage from the trusted hop", "10.0.0.1:1", []string{"203.0.113.9, garbage"}, nil, "10.0.0.1/32"},
		{"unknown behind a second proxy", "10.0.0.1:1", []string{"203.0.113.9, unknown, 10.0.0.2"}, nil, "10.0.0.2/32"},
		{"address with zone", "10.0.0.1:1", []string{"fe80::1%eth0"}, nil, "fe80::/64"},
		{"CIDR is not an address", "10.0.0.1:1", []string{"203.0.113.0/24"}, nil, "10.0.0.1/32"},
	})
}

func TestClientIPTrustedForwarded(t *testing.T) {
	runIPCases(t, IPOptions{TrustedProxies: proxies, Header: "Forwarded"}, []ipCase{
		{"RFC 7239 example", "10.0.0.1:1", nil, []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60/32"},
		{"quoted IPv6 with port", "10.0.0.1:1", nil, []string{`for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::/64"},
		{"case-insensitive name", "10.0.0.1:1", nil, []string{"For=192.0.2.60"}, "192.0.2.60/32"},
		{"spoofed leftmost element", "10.0.0.1:1", nil, []string{"for=1.1.1.1, for=203.0.113.9"}, "203.0.113.9/32"},
		{"trusted hops skipped", "10.0.0.1:1", nil, []string{"for=1.1.1.1, for=203.0.113.9;proto=https, for=10.0.0.2"}, "203.0.113.9/32"},
		{"lines walked last to first", "10.0.0.1:1", nil, []string{"for=1.1.1.1", "for=203.0.113.9"}, "203.0.113.9/32"},
		{"spoof with a quoted comma", "10.0.0.1:1", nil, []string{`for="1.1.1.1, for=9.9.9.9", for=203.0.113.9`}, "203.0.113.9/32"},
		{"spoof with an unterminated quote", "10.0.0.1:1", nil, []string{`for="1.1.1.1, for=203.0.113.9`}, "203.0.113.9/32"},
		{"spoof with escaped quotes", "10.0.0.1:1", nil, []string{`for="x\", for=9.9.9.9", for=203.0.113.9`}, "203.0.113.9/32"},
		{"spoof ending in a backslash", "10.0.0.1:1", nil, []string{`for="x\, for="[2001:db8:1::1]"`}, "2001:db8:1::/64"},
		{"obfuscated port", "10.0.0.1:1", nil, []string{`for="192.0.2.60:_p1"`}, "192.0.2.60/32"},
		{"XFF ignored when Forwarded is configured", "10.0.0.1:1", []string{"203.0.113.9"}, nil, "10.0.0.1/32"},
		{"unknown node: the trusted hop", "10.0.0.1:1", nil, []string{"for=unknown"}, "10.0.0.1/32"},
		{"obfuscated node: the trusted hop", "10.0.0.1:1", nil, []string{"for=203.0.113.9, for=_hidden, for=10.0.0.2"}, "10.0.0.2/32"},
		{"two for= in an element", "10.0.0.1:1", nil, []string{"for=203.0.113.9;for=1.1.1.1"}, "10.0.0.1/32"},
		{"element without for=", "10.0.0.1:1", nil, []string{"proto=https"}, "10.0.0.1/32"},
		// A bare IPv6 address, unquoted (a naive for=$remote_addr) or quoted
		// without brackets, is one address and nothing else: unambiguous,
		// so accepted (before, every such client fell back to the proxy's
		// key and shared one bucket). Brackets without quotes, or a bare
		// address beside another for=, stay malformed.
		{"unquoted bare IPv6", "10.0.0.1:1", nil, []string{"for=2001:db8::1"}, "2001:db8::/64"},
		{"quoted unbracketed IPv6", "10.0.0.1:1", nil, []string{`for="2001:db8::1"`}, "2001:db8::/64"},
		{"unquoted bracketed IPv6 is malformed", "10.0.0.1:1", nil, []string{"for=[2001:db8::1]"}, "10.0.0.1/32"},
		{"bare IPv6 and a second for=", "10.0.0.1:1", nil, []string{"for=2001:db8::1;for=1.1.1.1"}, "10.0.0.1/32"},
		{"unquoted IPv6 with a zone is malformed", "10.0.0.1:1", nil, []string{"for=fe80::1%eth0"}, "10.0.0.1/32"},
		{"bad port", "10.0.0.1:1", nil, []string{"for=\"192.0.2.60:123456\""}, "10.0.0.1/32"},
		{"unterminated quote from the trusted hop", "10.0.0.1:1", nil, []string{`for=203.0.113.9, for="10.0.0.2`}, "10.0.0.1/32"},
	})
}

func TestClientIPGrouping(t *testing.T) {
	runIPCases(t, IPOptions{IPv6Bits: 48, IPv4Bits: 24}, []ipCase{
		{"IPv6 /48", "[2001:db8:1:2::1]:1", nil, nil, "2001:db8:1::/48"},
		{"IPv4 /24", "192.0.2.200:1", nil, nil, "192.0.2.0/24"},
		{"IPv4-mapped grouped as IPv4", "[::ffff:192.0.2.200]:1", nil, nil, "192.0.2.0/24"},
	})
	// Two addresses in one /64 share a bucket; the next /64 does not.
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Second), 1)
	key, _ := ClientIP(IPOptions{})
	h := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}}).Handler(okHandler)
	if w := do(h, "GET", "/", "[2001:db8:0:1::1]:1"); w.Code != 200 {
		t.Fatalf("first request: %d", w.Code)
	}
	if w := do(h, "GET", "/", "[2001:db8:0:1:ffff::2]:1"); w.Code != 429 {
		t.Errorf("same /64: %d, want 429", w.Code)
	}
	if w := do(h, "GET", "/", "[2001:db8:0:2::1]:1"); w.Code != 200 {
		t.Errorf("next /64: %d, want 200", w.Code)
	}
}

func TestClientIPMappedTrustedProxy(t *testing.T) {
	// A trusted prefix given in IPv4-mapped form matches the IPv4 peer.
	runIPCases(t, IPOptions{TrustedProxies: []netip.Prefix{mustPrefix("::ffff:10.0.0.0/104")}}, []ipCase{
		{"mapped prefix", "10.1.2.3:1", []string{"203.0.113.9"}, nil, "203.0.113.9/32"},
	})
}

func TestClientIPOptionsErrors(t *testing.T) {
	for _, o := range []IPOptions{
		{IPv6Bits: 129}, {IPv6Bits: -1}, {IPv4Bits: 33}, {Header: "X-Client-IP"},
		{TrustedProxies: []netip.Prefix{{}}},
	} {
		if _, err := ClientIP(o); !errors.Is(err, ErrConfig) {
			t.Errorf("ClientIP(%+v) error = %v, want ErrConfig", o, err)
		}
	}
}

// Behind nginx on a unix socket RemoteAddr is "@": every request got a 500,
// and such a peer could not be trusted. Now a unix-socket peer keys as the
// unspecified address, and TrustUnixSocket makes it a trusted proxy.
func TestClientIPUnixSocketPeer(t *testing.T) {
	runIPCases(t, IPOptions{TrustedProxies: proxies}, []ipCase{
		{"untrusted unix peer is the client", "@", []string{"203.0.113.9"}, nil, "::/64"},
		{"unnamed", "", nil, nil, "::/64"},
		{"a path", "/run/nginx.sock", []string{"203.0.113.9"}, nil, "::/64"},
	})
	runIPCases(t, IPOptions{TrustUnixSocket: true}, []ipCase{
		{"trusted unix peer: XFF read", "@", []string{"1.1.1.1, 203.0.113.9"}, nil, "203.0.113.9/32"},
		{"trusted, IPv6 client", "@", []string{"2001:db8:1::7"}, nil, "2001:db8:1::/64"},
		{"trusted, no header", "@", nil, nil, "::/64"},
		{"trusted, garbage entry: the socket", "@", []string{"unknown"}, nil, "::/64"},
		{"TCP peers are not trusted by it", "203.0.113.7:1", []string{"198.51.100.1"}, nil, "203.0.113.7/32"},
	})
	// Through the middleware: served, not a 500.
	key, err := ClientIP(IPOptions{TrustUnixSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Second), 1)
	h := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}}).Handler(okHandler)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("unix-socket peer: %d, want 200", w.Code)
	}
}

func TestClientIPBadRemoteAddr(t *testing.T) {
	for _, ra := range []string{"pipe", "example.com:80", "1.2.3.4:port"} { // "", "@" and paths are unix-socket peers
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ra
		if _, err := RemoteIP(r); !errors.Is(err, ErrRemoteAddr) {
			t.Errorf("RemoteIP(%q) error = %v, want ErrRemoteAddr", ra, err)
		}
	}
	// Through the middleware: the error path, 500, and the Error hook.
	hook := newCountingHook()
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Second), 1)
	h := mustNew(t, Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}, Hook: hook.hook()}).Handler(okHandler)
	w := do(h, "GET", "/", "pipe")
	if w.Code != http.StatusInternalServerError || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("bad RemoteAddr: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if hook.errors["default"] != 1 || !errors.Is(hook.lastErr, ErrRemoteAddr) {
		t.Errorf("hook: %v, last error %v", hook, hook.lastErr)
	}
	if w.Header().Get("RateLimit") != "" {
		t.Errorf("error path wrote RateLimit %q", w.Header().Get("RateLimit"))
	}
}

func TestClientIPAllocs(t *testing.T) {
	key, _ := ClientIP(IPOptions{TrustedProxies: proxies, Header: "Forwarded"})
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:1"
	r.Header.Set("Forwarded", `for=1.1.1.1, for="[2001:db8:1::1]:80";proto=https, for=10.0.0.2`)
	if n := testing.AllocsPerRun(100, func() { key(r) }); n != 0 {
		t.Errorf("Forwarded walk: %v allocs, want 0", n)
	}
	key, _ = ClientIP(IPOptions{TrustedProxies: proxies})
	r.Header.Set("X-Forwarded-For", "1.1.1.1, 203.0.113.9, 10.0.0.2")
	if n := testing.AllocsPerRun(100, func() { key(r) }); n != 0 {
		t.Errorf("X-Forwarded-For walk: %v allocs, want 0", n)
	}
}

// Every form of an address gives the same key in X-Forwarded-For,
// Forwarded and X-Real-IP (fieldCases), through ClientIP.
func TestClientIPFormsInEveryHeader(t *testing.T) {
	keys := map[string]KeyFunc[netip.Prefix]{}
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		key, err := ClientIP(IPOptions{TrustedProxies: caseTrusted, Header: h})
		if err != nil {
			t.Fatal(err)
		}
		keys[h] = key
	}
	for _, c := range fieldCases() {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = casePeer + ":1"
		for _, v := range c.Lines {
			r.Header.Add(c.Header, v)
		}
		if got, err := keys[c.Header](r); err != nil || got != mustPrefix(c.Key) {
			t.Errorf("%s: %s %q: %v %v, want %s", c.Name, c.Header, c.Lines, got, err, c.Key)
		}
	}
}

// X-Real-IP is read only from a trusted proxy (a TCP peer in
// TrustedProxies, or a unix socket with TrustUnixSocket); a client that
// sends it directly keys as itself. Read, it allocates nothing.
func TestClientIPXRealIP(t *testing.T) {
	key, err := ClientIP(IPOptions{TrustedProxies: proxies, Header: "X-Real-IP"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, remote string
		real         []string
		xff          string
		want         string
	}{
		{"untrusted peer: ignored", "203.0.113.7:1", []string{"198.51.100.1"}, "", "203.0.113.7/32"},
		{"trusted peer: read", "10.0.0.1:1", []string{"198.51.100.1"}, "", "198.51.100.1/32"},
		{"trusted IPv6 peer", "[2001:db8:ffff::1]:1", []string{"[2001:db8:1::7]:443"}, "", "2001:db8:1::/64"},
		{"X-Forwarded-For not read", "10.0.0.1:1", nil, "198.51.100.1", "10.0.0.1/32"},
		{"a client's line and the proxy's: the peer", "10.0.0.1:1", []string{"6.6.6.6", "198.51.100.1"}, "", "10.0.0.1/32"},
		{"unix peer, not trusted", "@", []string{"198.51.100.1"}, "", "::/64"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.real {
			r.Header.Add("X-Real-Ip", v)
		}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got, err := key(r); err != nil || got != mustPrefix(tc.want) {
			t.Errorf("%s: %v %v, want %s", tc.name, got, err, tc.want)
		}
	}
	unix, _ := ClientIP(IPOptions{Header: "X-Real-IP", TrustUnixSocket: true})
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	r.Header.Set("X-Real-IP", "198.51.100.1")
	if got, err := unix(r); err != nil || got != mustPrefix("198.51.100.1/32") {
		t.Errorf("trusted unix peer: %v %v", got, err)
	}
	r.RemoteAddr = "10.0.0.1:1"
	if n := testing.AllocsPerRun(100, func() { key(r) }); n != 0 {
		t.Errorf("X-Real-IP: %v allocs, want 0", n)
	}
	// Through the middleware, 1 per minute: two clients behind the proxy
	// are two buckets; a client that reaches the server directly keys as
	// itself whatever it sends.
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	h := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}}).Handler(okHandler)
	for i, tc := range []struct {
		remote, real string
		want         int
	}{
		{"10.0.0.1:1", "198.51.100.1", 200},
		{"10.0.0.2:1", "198.51.100.2", 200},
		{"10.0.0.2:1", "198.51.100.1", 429},
		{"203.0.113.7:1", "198.51.100.3", 200},
		{"203.0.113.7:1", "198.51.100.4", 429},
	} {
		if w := do(h, "GET", "/", tc.remote, "X-Real-IP", tc.real); w.Code != tc.want {
			t.Errorf("request %d from %s as %s: %d, want %d", i, tc.remote, tc.real, w.Code, tc.want)
		}
	}
}
