package grpclimit

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

var proxies = []netip.Prefix{mustPrefix("10.0.0.0/8"), mustPrefix("2001:db8:ffff::/48")}

// The trusted-proxy rules of httplimit, on metadata: forwarded values are
// read only from a trusted peer, from the right, skipping trusted hops; a
// client's own entries (leftmost, or sent directly) change nothing.
func TestClientIP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      httplimit.IPOptions
		peer   string
		kv     []string
		want   string
		wantOK bool
	}{
		{"no proxies: the peer", httplimit.IPOptions{}, "192.0.2.7:1", []string{"x-forwarded-for", "203.0.113.1"}, "192.0.2.7/32", true},
		{"untrusted peer cannot spoof", httplimit.IPOptions{TrustedProxies: proxies}, "192.0.2.7:1", []string{"x-forwarded-for", "203.0.113.1"}, "192.0.2.7/32", true},
		{"trusted peer: XFF read", httplimit.IPOptions{TrustedProxies: proxies}, "10.0.0.2:1", []string{"x-forwarded-for", "203.0.113.1"}, "203.0.113.1/32", true},
		{"spoofed leftmost entries skipped", httplimit.IPOptions{TrustedProxies: proxies}, "10.0.0.2:1", []string{"x-forwarded-for", "1.1.1.1, 203.0.113.1, 10.0.0.3"}, "203.0.113.1/32", true},
		{"two values: the last first", httplimit.IPOptions{TrustedProxies: proxies}, "10.0.0.2:1", []string{"x-forwarded-for", "1.1.1.1", "x-forwarded-for", "203.0.113.9"}, "203.0.113.9/32", true},
		{"garbage ends the walk at the hop", httplimit.IPOptions{TrustedProxies: proxies}, "10.0.0.2:1", []string{"x-forwarded-for", "203.0.113.1, unknown"}, "10.0.0.2/32", true},
		{"trusted, no metadata: the proxy", httplimit.IPOptions{TrustedProxies: proxies}, "10.0.0.2:1", nil, "10.0.0.2/32", true},
		{"Forwarded", httplimit.IPOptions{TrustedProxies: proxies, Header: "Forwarded"}, "10.0.0.2:1", []string{"forwarded", `for=1.1.1.1, for="[2001:db8:1::1]:80";proto=https`}, "2001:db8:1::/64", true},
		{"Forwarded ignores XFF", httplimit.IPOptions{TrustedProxies: proxies, Header: "Forwarded"}, "10.0.0.2:1", []string{"x-forwarded-for", "203.0.113.1"}, "10.0.0.2/32", true},
		{"IPv6 grouped by /64", httplimit.IPOptions{}, "[2001:db8:7::9]:1", nil, "2001:db8:7::/64", true},
		{"IPv4 bits", httplimit.IPOptions{IPv4Bits: 24}, "192.0.2.7:1", nil, "192.0.2.0/24", true},
		{"IPv4-mapped peer unmapped", httplimit.IPOptions{}, "[::ffff:192.0.2.7]:1", nil, "192.0.2.7/32", true},
	} {
		key, err := ClientIP(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, _ := callCtx(tc.peer, tc.kv...)
		got, err := key(ctx, echo.Say)
		if err != nil || got != mustPrefix(tc.want) {
			t.Errorf("%s: key = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	for _, o := range []httplimit.IPOptions{{IPv6Bits: 129}, {IPv4Bits: 33}, {Header: "X-Client-IP"}, {TrustedProxies: []netip.Prefix{{}}}} {
		if _, err := ClientIP(o); !errors.Is(err, ErrConfig) {
			t.Errorf("ClientIP(%+v): %v, want ErrConfig", o, err)
		}
	}
	// Peers that are not TCP: a unix socket keys as ::, trusted or not; an
	// in-memory address and no peer at all are ErrPeer.
	key, _ := ClientIP(httplimit.IPOptions{TrustUnixSocket: true})
	unix := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "@", Net: "unix"}})
	if got, err := key(metadata.NewIncomingContext(unix, metadata.Pairs("x-forwarded-for", "203.0.113.1")), ""); err != nil || got != mustPrefix("203.0.113.1/32") {
		t.Errorf("trusted unix peer: %v %v", got, err)
	}
	if got, err := PeerIP(unix, ""); err != nil || got != mustPrefix("::/64") {
		t.Errorf("unix peer: %v %v", got, err)
	}
	// PeerIP keys as ClientIP with zero options: one client, one key.
	for peer, want := range map[string]string{"[::ffff:192.0.2.7]:1": "192.0.2.7/32", "[fe80::1%eth0]:1": "fe80::/64", "192.0.2.7:1": "192.0.2.7/32"} {
		ctx, _ := callCtx(peer)
		zero, _ := ClientIP(httplimit.IPOptions{})
		if got, err := PeerIP(ctx, ""); err != nil || got != mustPrefix(want) {
			t.Errorf("PeerIP, peer %s: %v %v, want %s", peer, got, err, want)
		} else if z, _ := zero(ctx, ""); z != got {
			t.Errorf("PeerIP, peer %s: %v, ClientIP with zero options %v", peer, got, z)
		}
	}
	mem := peer.NewContext(context.Background(), &peer.Peer{Addr: memAddr{}})
	for _, ctx := range []context.Context{mem, context.Background()} {
		if _, err := key(ctx, ""); !errors.Is(err, ErrPeer) {
			t.Errorf("no IP peer: %v, want ErrPeer", err)
		}
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "bufconn" }

// An untrusted peer's key allocates nothing; a trusted one's reads the
// metadata, which grpc's ValueFromIncomingContext copies: one allocation.
func TestClientIPAllocs(t *testing.T) {
	key, _ := ClientIP(httplimit.IPOptions{TrustedProxies: proxies})
	ctx, _ := callCtx("192.0.2.7:1", "x-forwarded-for", "203.0.113.1")
	if n := testing.AllocsPerRun(100, func() { key(ctx, "") }); n != 0 {
		t.Errorf("untrusted peer: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { PeerIP(ctx, "") }); n != 0 {
		t.Errorf("PeerIP: %v allocs, want 0", n)
	}
	ctx, _ = callCtx("10.0.0.2:1", "x-forwarded-for", "1.1.1.1, 203.0.113.1")
	if n := testing.AllocsPerRun(100, func() { key(ctx, "") }); n != 1 {
		t.Errorf("trusted peer: %v allocs, want 1 (the metadata copy)", n)
	}
}

// Over a real connection from 127.0.0.1, which the server does not trust:
// ten calls, each with another forwarded address, share the peer's one
// budget (3). Trusting loopback instead, the same calls are ten clients:
// the test would see the metadata if it were read.
func TestSpoofingOnTheWire(t *testing.T) {
	for _, trust := range []bool{false, true} {
		o := httplimit.IPOptions{TrustedProxies: proxies}
		if trust {
			o.TrustedProxies = append(o.TrustedProxies, mustPrefix("127.0.0.0/8"))
		}
		key, _ := ClientIP(o)
		lim := newKeyed[netip.Prefix](t, nil, gcra.Every(time.Hour), 3)
		m := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "ip", Limiter: lim}}})
		cc := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())})
		ok := 0
		for i := range 10 {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String())
			if _, err := echo.CallSay(ctx, cc, "hi"); err == nil {
				ok++
			} else if status.Code(err) != codes.ResourceExhausted {
				t.Fatal(err)
			}
		}
		switch {
		case !trust && (ok != 3 || lim.Stats().Keys != 1):
			t.Errorf("untrusted loopback: %d admitted over %d keys, want 3 over the peer's one", ok, lim.Stats().Keys)
		case trust && (ok != 10 || lim.Stats().Keys != 10):
			t.Errorf("trusted loopback: %d admitted over %d keys, want 10 over 10", ok, lim.Stats().Keys)
		}
	}
}

func TestAPIKeyFullMethodCompose(t *testing.T) {
	valid := func(k string) bool { return k != "revoked" }
	for _, tc := range []struct {
		name, mdKey string
		kv          []string
		want        string
		wantErr     error
	}{
		{"x-api-key", "X-API-Key", []string{"x-api-key", " k1 "}, "k1", nil},
		{"bearer", "authorization", []string{"authorization", "Bearer tok"}, "tok", nil},
		{"bearer any case", "Authorization", []string{"authorization", "bearer tok"}, "tok", nil},
		{"missing", "x-api-key", nil, "", ErrNoKey},
		{"empty", "x-api-key", []string{"x-api-key", "  "}, "", ErrNoKey},
		{"invalid", "x-api-key", []string{"x-api-key", "revoked"}, "", ErrInvalidKey},
	} {
		ctx, _ := callCtx("192.0.2.1:1", tc.kv...)
		got, err := APIKey(tc.mdKey, valid)(ctx, echo.Say)
		if got != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if m, err := FullMethod(context.Background(), echo.Say); m != echo.Say || err != nil {
		t.Errorf("FullMethod: %q %v", m, err)
	}
	if _, err := FullMethod(context.Background(), ""); !errors.Is(err, ErrNoKey) {
		t.Errorf("FullMethod empty: %v", err)
	}
	ctx, _ := callCtx("192.0.2.1:1", "x-api-key", "k1")
	k, err := Compose(PeerIP, APIKey("x-api-key", nil))(ctx, echo.Say)
	if err != nil || k != (httplimit.Pair[netip.Prefix, string]{First: mustPrefix("192.0.2.1/32"), Second: "k1"}) {
		t.Errorf("Compose: %v %v", k, err)
	}
	ctx, _ = callCtx("192.0.2.1:1")
	if _, err := Compose(PeerIP, APIKey("x-api-key", nil))(ctx, echo.Say); !errors.Is(err, ErrNoKey) {
		t.Errorf("Compose without the second part: %v", err)
	}
}

// Issue 28, "one key bound for every door": every key function that reads
// the client's bytes holds its keys to one bound, 256 bytes unless its
// MaxKeyLen option says otherwise, as httplimit's do. Through a real
// server: a key of exactly the bound is served, one byte more is
// InvalidArgument (RejectOnError, as for a missing key), never a key in the
// limiter. MaxKeyLen(0) accepts no key; FullMethod, which takes no option,
// holds to the default (a client chooses the method only where the server
// has an UnknownServiceHandler, whose calls pass the stream interceptor).
func TestIssue28KeyBound(t *testing.T) {
	unknown := grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		return ss.SendMsg(in)
	})
	for _, tc := range []struct {
		name   string
		key    KeyFunc[string]
		bound  int
		md     string // the metadata the key is sent in; "" for the method
		prefix string // before the key in the metadata (a scheme)
	}{
		{"APIKey", APIKey("x-api-key", nil), 256, "x-api-key", ""},
		{"APIKey/authorization", APIKey("authorization", nil), 256, "authorization", "Bearer "},
		{"APIKey/MaxKeyLen(8)", APIKey("x-api-key", nil, MaxKeyLen(8)), 8, "x-api-key", ""},
		{"APIKey/MaxKeyLen(1000)", APIKey("authorization", nil, MaxKeyLen(1000)), 1000, "authorization", "Bearer "},
		{"APIKey/MaxKeyLen(0)", APIKey("x-api-key", nil, MaxKeyLen(0)), 0, "x-api-key", ""},
		{"FullMethod", FullMethod, 256, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := newKeyed[string](t, nil, gcra.Every(time.Hour), 10)
			h := newCountingHook()
			m := mustNew(t, Config[string]{Key: tc.key, Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Hook: h.hook()})
			cc := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary()), grpc.ChainStreamInterceptor(m.Stream()), unknown})
			call := func(n int) codes.Code {
				t.Helper()
				key := strings.Repeat("k", n)
				ctx, method := context.Background(), echo.Say
				if tc.md == "" {
					method = "/s/" + key[3:] // the full method name is the key
				} else {
					ctx = metadata.AppendToOutgoingContext(ctx, tc.md, tc.prefix+key)
				}
				err := cc.Invoke(ctx, method, wrapperspb.String("hi"), new(wrapperspb.StringValue))
				return status.Code(err)
			}
			if tc.bound > 0 {
				if got := call(tc.bound); got != codes.OK {
					t.Errorf("a key of %d bytes, the bound: %v, want OK", tc.bound, got)
				}
			}
			if got := call(tc.bound + 1); got != codes.InvalidArgument {
				t.Errorf("a key of %d bytes, one over the bound: %v, want InvalidArgument", tc.bound+1, got)
			}
			if n := lim.Stats().Keys; n != min(tc.bound, 1) {
				t.Errorf("the limiter holds %d keys, want %d: the long key never reaches it", n, min(tc.bound, 1))
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.error["default"] != 1 || !errors.Is(h.errs[0], ErrInvalidKey) {
				t.Errorf("Hook.Error heard %v %v, want the long key once, ErrInvalidKey", h.error, h.errs)
			}
		})
	}
}

// CertSubject over a real mTLS connection: the verified client
// certificate's subject is the key; two calls of one client share it.
func TestCertSubjectMTLS(t *testing.T) {
	ca, caKey := newCert(t, "test CA", nil, nil, true)
	srvCert, srvKey := newCert(t, "server", ca, caKey, false)
	cliCert, cliKey := newCert(t, "client-a", ca, caKey, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	serverTLS := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: pool,
	}
	clientTLS := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{cliCert.Raw}, PrivateKey: cliKey}},
		RootCAs:      pool, ServerName: "127.0.0.1",
	}
	lim := newKeyed[string](t, nil, gcra.Every(time.Hour), 2)
	m := mustNew(t, Config[string]{Key: CertSubject, Policies: []atomiclimit.Policy[string]{{Name: "id", Limiter: lim}}})
	cc := serveTLS(t, credentials.NewTLS(serverTLS), credentials.NewTLS(clientTLS), m)
	for i := range 3 {
		_, err := echo.CallSay(context.Background(), cc, "hi")
		if (err == nil) != (i < 2) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if d := peekDecision(lim, "CN=client-a,O=atomiclimit test", 0); d.Remaining != 0 {
		t.Errorf("the identity's key has %d left, want 0 (keys: %d)", d.Remaining, lim.Stats().Keys)
	}
	// Without a verified chain: ErrNoKey.
	if _, err := CertSubject(callCtxOnly("192.0.2.1:1"), ""); !errors.Is(err, ErrNoKey) {
		t.Errorf("no TLS: %v", err)
	}
}

func serveTLS(t *testing.T, server, client credentials.TransportCredentials, m *Interceptor[string]) *grpc.ClientConn {
	t.Helper()
	return serve(t, []grpc.ServerOption{grpc.Creds(server), grpc.ChainUnaryInterceptor(m.Unary())}, grpc.WithTransportCredentials(client))
}

// newCert returns a certificate for cn (with IP SAN 127.0.0.1) signed by
// parent (self-signed if nil), and its key.
func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"atomiclimit test"}},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:        isCA, BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// Every form of an address gives the same key in x-forwarded-for,
// forwarded and x-real-ip (fieldCases), through ClientIP: the metadata
// key of each string is its name lower-cased.
func TestClientIPFormsInEveryField(t *testing.T) {
	keys := map[string]KeyFunc[netip.Prefix]{}
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		key, err := ClientIP(httplimit.IPOptions{TrustedProxies: caseTrusted, Header: h})
		if err != nil {
			t.Fatal(err)
		}
		keys[strings.ToLower(h)] = key
	}
	for _, c := range fieldCases() {
		field := strings.ToLower(c.Header)
		var kv []string
		for _, v := range c.Lines {
			kv = append(kv, field, v)
		}
		ctx, _ := callCtx(casePeer+":1", kv...)
		if got, err := keys[field](ctx, echo.Say); err != nil || got != mustPrefix(c.Key) {
			t.Errorf("%s: %s %q: %v %v, want %s", c.Name, field, c.Lines, got, err, c.Key)
		}
	}
}

// x-real-ip over a real connection from 127.0.0.1: not trusted, ten calls
// that each name another client share the peer's budget (3); trusted, they
// are ten clients. A client's own value beside the proxy's (two values) is
// not an address the proxy set: the key is the peer's.
func TestXRealIPOnTheWire(t *testing.T) {
	for _, trust := range []bool{false, true} {
		o := httplimit.IPOptions{Header: "X-Real-IP"}
		if trust {
			o.TrustedProxies = []netip.Prefix{mustPrefix("127.0.0.0/8")}
		}
		key, _ := ClientIP(o)
		lim := newKeyed[netip.Prefix](t, nil, gcra.Every(time.Hour), 3)
		m := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "ip", Limiter: lim}}})
		cc := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())})
		ok := 0
		for i := range 10 {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-real-ip", netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String())
			if _, err := echo.CallSay(ctx, cc, "hi"); err == nil {
				ok++
			} else if status.Code(err) != codes.ResourceExhausted {
				t.Fatal(err)
			}
		}
		switch {
		case !trust && (ok != 3 || lim.Stats().Keys != 1):
			t.Errorf("untrusted loopback: %d admitted over %d keys, want 3 over the peer's one", ok, lim.Stats().Keys)
		case trust && (ok != 10 || lim.Stats().Keys != 10):
			t.Errorf("trusted loopback: %d admitted over %d keys, want 10 over 10", ok, lim.Stats().Keys)
		}
	}
	key, _ := ClientIP(httplimit.IPOptions{TrustedProxies: proxies, Header: "X-Real-IP"})
	ctx, _ := callCtx("10.0.0.2:1", "x-real-ip", "6.6.6.6", "x-real-ip", "203.0.113.1")
	if got, err := key(ctx, ""); err != nil || got != mustPrefix("10.0.0.2/32") {
		t.Errorf("two values: %v %v, want the peer's", got, err)
	}
	ctx, _ = callCtx("10.0.0.2:1", "x-real-ip", "203.0.113.1")
	if n := testing.AllocsPerRun(100, func() { key(ctx, "") }); n != 1 {
		t.Errorf("trusted peer: %v allocs, want 1 (the metadata copy)", n)
	}
}
