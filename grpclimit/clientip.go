package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/atomiclimit/atomiclimit/internal/clientip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// ErrPeer is returned by the client-IP key functions when the call's peer
// (peer.FromContext) is missing or has an address that is neither TCP nor
// a unix socket (an in-memory listener's).
var ErrPeer = errors.New("grpclimit: peer address is not an IP address")

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
	// XRealIP is "x-real-ip": one address, the client's, which the proxy
	// sets, replacing any the client sent. It is not a list: two values, a
	// list, or anything else that is not one address is ignored, and the
	// key is then the trusted proxy's. The address is the client even when
	// it is in TrustedProxies.
	XRealIP
)

// String returns the metadata key ("x-forwarded-for").
func (h ProxyHeader) String() string { return clientip.Field(h).Key() }

// ClientIP returns a key function that keys a call on its client's address,
// masked to the configured prefix length: a netip.Prefix, comparable, so it
// keys a Keyed limiter without formatting a string.
//
// The client is the peer (peer.FromContext: the TCP connection's remote
// address, IPv4-mapped addresses unmapped), unless the peer is in
// TrustedProxies: then the configured metadata's values are walked from
// the right (the last value first), skipping trusted hops, and the first
// untrusted entry is the client (x-real-ip has one entry, the client: see
// XRealIP). Entries to its left were written by the client or by proxies
// we do not trust and are never looked at, so spoofed leftmost entries
// change nothing; an entry that is not an address ends the walk at the
// trusted hop that forwarded it. An entry takes the forms
// httplimit.ClientIP's do, alike in every field. Invalid options are
// ErrConfig.
//
// It allocates nothing for a peer that is not trusted. For a trusted peer
// it reads the metadata with metadata.ValueFromIncomingContext, which
// copies the value slice: one allocation.
func ClientIP(o IPOptions) (KeyFunc[netip.Prefix], error) {
	res, err := clientip.NewFor(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	name := o.Header.String()
	return func(ctx context.Context, _ string) (netip.Prefix, error) {
		a, unix, err := peerAddr(ctx)
		if err != nil {
			return netip.Prefix{}, err
		}
		return res.Key(a, unix, func() []string { return metadata.ValueFromIncomingContext(ctx, name) }), nil
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
