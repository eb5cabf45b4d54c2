package grpclimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/atomiclimit/atomiclimit/httplimit"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// ErrPeer is returned by the client-IP key functions when the call's peer
// (peer.FromContext) is missing or has an address that is neither TCP nor
// a unix socket (an in-memory listener's).
var ErrPeer = errors.New("grpclimit: peer address is not an IP address")

// ClientIP returns a key function that keys a call on its client's address,
// masked to the configured prefix length: a netip.Prefix, comparable, so it
// keys a Keyed limiter without formatting a string. The options, and the
// rule, are httplimit's (httplimit.IPOptions, httplimit.ClientIP), for a
// call's peer and metadata instead of a request's RemoteAddr and headers;
// the zero value keys on the peer alone, IPv6 grouped by /64 and IPv4 by
// /32.
//
// The client is the peer (peer.FromContext: the TCP connection's remote
// address, IPv4-mapped addresses unmapped; a unix-socket peer is the
// unspecified address, ::), unless the peer is in TrustedProxies (or is a
// unix socket, with TrustUnixSocket): then the values of the incoming
// metadata that o.Header names, lower-cased as gRPC metadata keys are
// ("x-forwarded-for", as Envoy and nginx's grpc_pass set it; "forwarded";
// "x-real-ip"), are walked from the right (the last value first), skipping
// trusted hops, and the first untrusted entry is the client (x-real-ip has
// one entry, the client). Entries to its left were written by the client
// or by proxies we do not trust and are never looked at, so spoofed
// leftmost entries change nothing; an entry that is not an address ends
// the walk at the trusted hop that forwarded it. An entry takes the forms
// httplimit.ClientIP's do, alike in every field. Invalid options are
// ErrConfig.
//
// It allocates nothing for a peer that is not trusted. For a trusted peer
// it reads the metadata with metadata.ValueFromIncomingContext, which
// copies the value slice: one allocation.
func ClientIP(o httplimit.IPOptions) (KeyFunc[netip.Prefix], error) {
	res, err := httplimit.NewIPResolver(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	name := strings.ToLower(cmp.Or(o.Header, "X-Forwarded-For")) // NewIPResolver vouched for it
	return func(ctx context.Context, _ string) (netip.Prefix, error) {
		a, err := peerAddr(ctx)
		if err != nil {
			return netip.Prefix{}, err
		}
		return res.Client(a, func() []string { return metadata.ValueFromIncomingContext(ctx, name) }), nil
	}, nil
}

// PeerIP keys a call on its peer's address alone, IPv6 grouped by /64 and
// IPv4 by /32 (a unix-socket peer is ::/64): ClientIP with zero
// httplimit.IPOptions. It allocates nothing.
func PeerIP(ctx context.Context, _ string) (netip.Prefix, error) {
	a, err := peerAddr(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.IsValid() {
		a = a.Unmap().WithZone("") // one client, one key (as IPResolver.Client)
	} else {
		a = netip.IPv6Unspecified()
	}
	bits := 64
	if a.Is4() {
		bits = 32
	}
	p, _ := a.Prefix(bits) // cannot fail: a is valid, bits fits it
	return p, nil
}

// peerAddr returns the call's peer address as the peer has it (an
// IPv4-mapped address, a zone: httplimit.IPResolver.Client and PeerIP drop
// them), or the zero Addr for a unix-socket peer, as IPResolver.Client
// takes it.
func peerAddr(ctx context.Context) (netip.Addr, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, ErrPeer
	}
	switch addr := p.Addr.(type) {
	case *net.TCPAddr:
		if ap := addr.AddrPort(); ap.Addr().IsValid() {
			return ap.Addr(), nil
		}
	case *net.UnixAddr:
		return netip.Addr{}, nil
	default:
		s := addr.String()
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return ap.Addr(), nil
		}
		if a, err := netip.ParseAddr(s); err == nil {
			return a, nil
		}
		if addr.Network() == "unix" {
			return netip.Addr{}, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: %s %q", ErrPeer, p.Addr.Network(), p.Addr.String())
}
