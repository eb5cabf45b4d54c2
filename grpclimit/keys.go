package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/atomiclimit/atomiclimit/internal/clientip"
	"github.com/atomiclimit/atomiclimit/internal/httpsyntax"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// A KeyFunc returns the key a call is limited under: its partition. ctx is
// the call's context (on a server: the peer, the incoming metadata, and
// whatever the interceptors before this one added; on a client: the
// outgoing one) and fullMethod is "/package.Service/Method". An error sends
// the call down the error path (Config.OnError) instead. Key functions run
// on every call: see each one's doc for what it allocates.
type KeyFunc[K comparable] func(ctx context.Context, fullMethod string) (K, error)

// ErrNoKey is returned by a key function when the call lacks what it keys on
// (no metadata value, no verified certificate).
var ErrNoKey = errors.New("grpclimit: call has no key")

// ErrInvalidKey is returned by APIKey when its validation function rejects
// the key.
var ErrInvalidKey = errors.New("grpclimit: invalid key")

// ErrPeer is returned by the client-IP key functions when the call's peer
// (peer.FromContext) is missing or has an address that is neither TCP nor
// a unix socket (an in-memory listener's).
var ErrPeer = errors.New("grpclimit: peer address is not an IP address")

// ErrIPOptions is returned by ClientIP for invalid options.
var ErrIPOptions = errors.New("grpclimit: invalid client-IP options")

// A ProxyHeader names the forwarding metadata a trusted proxy sets.
type ProxyHeader uint8

const (
	// XForwardedFor is "x-forwarded-for", as Envoy and nginx's grpc_pass
	// set it: a comma-separated list of addresses, each proxy appending the
	// address it received the call from.
	XForwardedFor ProxyHeader = iota
	// Forwarded is the RFC 7239 "forwarded" field; the for= parameter of
	// each element is the address the appending proxy received the call
	// from.
	Forwarded
)

func (h ProxyHeader) String() string {
	switch h {
	case XForwardedFor:
		return "x-forwarded-for"
	case Forwarded:
		return "forwarded"
	}
	return fmt.Sprintf("ProxyHeader(%d)", uint8(h))
}

// IPOptions configures ClientIP. The zero value keys on the peer address
// alone, with IPv6 addresses grouped by /64 and IPv4 addresses kept whole
// (/32). The rules are httplimit.IPOptions', for metadata instead of
// headers.
type IPOptions struct {
	// TrustedProxies are the networks of the proxies in front of the
	// server. Only when the peer is inside one of them is the forwarding
	// metadata read at all; otherwise it is ignored, so a client that
	// reaches the server directly cannot choose its key by sending it. List
	// only your proxies: every address in a trusted prefix is skipped as a
	// hop.
	TrustedProxies []netip.Prefix
	// Header is the forwarding metadata the trusted proxies set
	// (XForwardedFor by default). Only that one is read.
	Header ProxyHeader
	// IPv6Bits is the prefix length IPv6 clients are grouped by (default
	// 64), 1 to 128; IPv4Bits the IPv4 one (default 32), 1 to 32.
	IPv6Bits, IPv4Bits int
	// TrustUnixSocket makes a peer on a unix socket a trusted proxy.
	// Either way a unix-socket peer's own key is the unspecified address
	// (::), never an error.
	TrustUnixSocket bool
}

// ClientIP returns a key function that keys a call on its client's address,
// masked to the configured prefix length: a netip.Prefix, comparable, so it
// keys a Keyed limiter without formatting a string.
//
// The client is the peer (peer.FromContext: the TCP connection's remote
// address, IPv4-mapped addresses unmapped), unless the peer is in
// TrustedProxies: then the configured metadata's values are walked from
// the right (the last value first), skipping trusted hops, and the first
// untrusted entry is the client. Entries to its left were written by the
// client or by proxies we do not trust and are never looked at, so spoofed
// leftmost entries change nothing; an entry that is not an address ends the
// walk at the trusted hop that forwarded it.
//
// It allocates nothing for a peer that is not trusted. For a trusted peer
// it reads the metadata with metadata.ValueFromIncomingContext, which
// copies the value slice: one allocation.
func ClientIP(o IPOptions) (KeyFunc[netip.Prefix], error) {
	co := clientip.Options{Trusted: o.TrustedProxies, Bits4: o.IPv4Bits, Bits6: o.IPv6Bits, TrustUnix: o.TrustUnixSocket}
	switch o.Header {
	case XForwardedFor:
	case Forwarded:
		co.Forwarded = true
	default:
		return nil, fmt.Errorf("%w: %v", ErrIPOptions, o.Header)
	}
	res, err := clientip.New(co)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIPOptions, err)
	}
	name := o.Header.String()
	return func(ctx context.Context, _ string) (netip.Prefix, error) {
		a, unix, err := peerAddr(ctx)
		if err != nil {
			return netip.Prefix{}, err
		}
		var lines []string
		trusted := res.Trusts(a, unix)
		if trusted {
			lines = metadata.ValueFromIncomingContext(ctx, name)
		}
		return res.Client(a, trusted, lines), nil
	}, nil
}

// PeerIP keys a call on its peer's address alone, IPv6 grouped by /64 and
// IPv4 by /32: ClientIP with zero IPOptions. It allocates nothing.
func PeerIP(ctx context.Context, _ string) (netip.Prefix, error) {
	a, _, err := peerAddr(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	return clientip.Mask(a, 32, 64), nil
}

// peerAddr returns the call's peer address, normalized, or for a unix-socket
// peer the unspecified address and unix = true.
func peerAddr(ctx context.Context) (a netip.Addr, unix bool, err error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, false, ErrPeer
	}
	switch addr := p.Addr.(type) {
	case *net.TCPAddr:
		if ap := addr.AddrPort(); ap.Addr().IsValid() {
			return clientip.Normalize(ap.Addr()), false, nil
		}
	case *net.UnixAddr:
		return netip.IPv6Unspecified(), true, nil
	default:
		s := addr.String()
		if a, ok := clientip.ParsePeer(s); ok {
			return a, false, nil
		}
		if addr.Network() == "unix" {
			return netip.IPv6Unspecified(), true, nil
		}
	}
	return netip.Addr{}, false, fmt.Errorf("%w: %s %q", ErrPeer, p.Addr.Network(), p.Addr.String())
}

// APIKey keys a call on an API key in the named incoming metadata (a key
// such as "x-api-key"; any case, read lower-cased as gRPC sends it). For
// "authorization" the scheme ("Bearer ", any case) is stripped; surrounding
// whitespace is trimmed in any field. A missing key is ErrNoKey.
//
// valid, if not nil, must accept the key, or the call fails with
// ErrInvalidKey. Without it any string is a key: a client that invents keys
// gets a fresh burst with each, so either validate here or limit after
// authentication. It reads the metadata with
// metadata.ValueFromIncomingContext, which copies the value slice: one
// allocation per call.
func APIKey(name string, valid func(key string) bool) KeyFunc[string] {
	name = strings.ToLower(name)
	auth := name == "authorization"
	return func(ctx context.Context, _ string) (string, error) {
		k, _ := httpsyntax.APIKey(metadata.ValueFromIncomingContext(ctx, name), auth)
		if k == "" {
			return "", ErrNoKey
		}
		if valid != nil && !valid(k) {
			return "", ErrInvalidKey
		}
		return k, nil
	}
}

// FullMethod keys a call on its full method name, "/package.Service/Method",
// so that all calls of a method share one limit. It allocates nothing.
func FullMethod(_ context.Context, fullMethod string) (string, error) {
	if fullMethod == "" {
		return "", ErrNoKey
	}
	return fullMethod, nil
}

// CertSubject keys a call on the authenticated identity of an mTLS peer: the
// subject of the leaf of its verified certificate chain, as
// pkix.Name.String formats it ("CN=client-a,O=Example"). The server's
// tls.Config must verify client certificates (ClientAuth
// RequireAndVerifyClientCert or VerifyClientCertIfGiven); a call without a
// verified chain is ErrNoKey. It formats the subject on every call (it
// allocates). For an identity another interceptor put in the context (a
// token's subject), write a KeyFunc that reads it, and chain this
// interceptor after that one.
func CertSubject(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", ErrNoKey
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", ErrNoKey
	}
	return info.State.VerifiedChains[0][0].Subject.String(), nil
}

// A Pair is a composite key of two parts. It is comparable when its parts
// are, so a Keyed[Pair[A, B]] needs no string formatting.
type Pair[A, B comparable] struct {
	First  A
	Second B
}

// Compose keys a call on both a and b: Compose(clientIP, FullMethod) limits
// each client on each method separately. An error from either is the error.
func Compose[A, B comparable](a KeyFunc[A], b KeyFunc[B]) KeyFunc[Pair[A, B]] {
	return func(ctx context.Context, m string) (Pair[A, B], error) {
		ka, err := a(ctx, m)
		if err != nil {
			return Pair[A, B]{}, err
		}
		kb, err := b(ctx, m)
		if err != nil {
			return Pair[A, B]{}, err
		}
		return Pair[A, B]{ka, kb}, nil
	}
}
