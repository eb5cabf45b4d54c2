package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ErrRemoteAddr is returned by the client-IP key functions when the
// request's RemoteAddr is neither an IP address (with or without a port)
// nor a unix-socket peer ("@", empty, or a path: see
// IPOptions.TrustUnixSocket). The net/http server sets a parseable one for
// TCP connections; a custom listener (a test harness) may not.
var ErrRemoteAddr = errors.New("httplimit: RemoteAddr is not an IP address")

// proxyHeader is the forwarding header IPOptions.Header names.
type proxyHeader uint8

const (
	xForwardedFor proxyHeader = iota
	forwarded
	xRealIP
)

// proxyHeaderNames are the headers' names as their specifications spell
// them, by proxyHeader.
var proxyHeaderNames = [...]string{xForwardedFor: "X-Forwarded-For", forwarded: "Forwarded", xRealIP: "X-Real-IP"}

// parseProxyHeader returns the header name names, in any letter case
// (empty: X-Forwarded-For).
func parseProxyHeader(name string) (proxyHeader, error) {
	if name == "" {
		return xForwardedFor, nil
	}
	for h, n := range proxyHeaderNames {
		if strings.EqualFold(name, n) {
			return proxyHeader(h), nil
		}
	}
	return 0, fmt.Errorf("unknown proxy header %q (X-Forwarded-For, Forwarded or X-Real-IP)", name)
}

// IPOptions configures ClientIP, and the same rule for other doors
// (NewIPResolver; grpclimit's ClientIP, where the peer is a call's and the
// header its metadata). The zero value keys on RemoteAddr alone, with IPv6
// addresses grouped by /64 and IPv4 addresses kept whole (/32).
type IPOptions struct {
	// TrustedProxies are the networks of the reverse proxies in front of the
	// server. Only when the TCP peer (RemoteAddr) is inside one of them is
	// the forwarding header read at all; otherwise it is ignored, so a client
	// that reaches the server directly cannot choose its key by sending one.
	// IPv4-mapped IPv6 prefixes (::ffff:10.0.0.0/104) are converted to their
	// IPv4 form (10.0.0.0/8). List only your proxies: every address in a
	// trusted prefix is skipped as a hop, so a client inside one (or any
	// client, with 0.0.0.0/0) can name its own key.
	TrustedProxies []netip.Prefix
	// Header is the forwarding header the trusted proxies set, by name in
	// any letter case (another name is ErrConfig). Only that one is read: a
	// proxy that sets one header passes the others through from the client
	// untouched.
	//
	//   - "X-Forwarded-For" (the default, ""): a comma-separated list of
	//     addresses, each proxy appending the address it received the
	//     request from.
	//   - "Forwarded": RFC 7239; the for= parameter of each element is the
	//     address the appending proxy received the request from.
	//   - "X-Real-IP": one address, the client's, which the proxy sets
	//     (nginx: proxy_set_header X-Real-IP $remote_addr), replacing any
	//     the client sent. It is not a list: two header lines, a list, or
	//     anything else that is not one address is ignored, and the key is
	//     then the trusted proxy's. The address is the client even when it
	//     is in TrustedProxies.
	//
	// In gRPC metadata (grpclimit.ClientIP) the same field is read under
	// its name lower-cased ("x-forwarded-for").
	Header string
	// IPv6Bits is the prefix length IPv6 clients are grouped by (default 64:
	// one end site's subnet; an attacker usually holds a whole /64 and can
	// rotate through its 2^64 addresses). 1 to 128.
	IPv6Bits int
	// IPv4Bits is the prefix length IPv4 clients are grouped by (default
	// 32). 1 to 32.
	IPv4Bits int
	// TrustUnixSocket makes a peer on a unix socket (a RemoteAddr that is
	// "@", empty or a path, as behind nginx on a unix socket) a trusted
	// proxy: the header is read as from TrustedProxies. Without it such a
	// peer is the client. Either way a unix-socket peer's own key is the
	// unspecified address (::), one bucket for all requests it is the
	// client of, never an error.
	TrustUnixSocket bool
}

// ClientIP returns a key function that keys a request on its client's
// address, masked to the configured prefix length: a netip.Prefix, which is
// comparable, so it keys a Keyed limiter without formatting a string (see
// the package documentation for the measurement).
//
// The client is found as follows:
//
//  1. The peer is RemoteAddr, with IPv4-mapped IPv6 addresses unmapped and
//     any zone dropped.
//  2. If the peer is not in TrustedProxies, it is the client: forwarding
//     headers are never read.
//  3. Otherwise the configured header's entries are walked from right to
//     left (the last header line first): each entry is the address the hop
//     to its right received the request from. The first entry that is not
//     a trusted proxy is the client. Entries to its left were written by
//     the client or by proxies we do not trust and are never looked at, so
//     spoofed leftmost entries change nothing. (X-Real-IP has one entry,
//     the client: see IPOptions.Header.)
//  4. An entry that is not an address ("unknown", an obfuscated
//     identifier, garbage) ends the walk: the key is then the trusted hop
//     that forwarded it, the last address we can vouch for. If every entry
//     is trusted, the leftmost is the client.
//
// An entry is an address as a proxy writes it, the same in every header:
// IPv4 or IPv6 alone, IPv4 with a port, IPv6 in brackets with or without a
// port (quoted in Forwarded, as RFC 7239 requires; a bare IPv6 address is
// accepted unquoted too). Invalid options are ErrConfig.
func ClientIP(o IPOptions) (KeyFunc[netip.Prefix], error) {
	res, err := newResolver(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	header := http.CanonicalHeaderKey(proxyHeaderNames[res.header])
	return func(r *http.Request) (netip.Prefix, error) {
		peer, unix, err := remotePeer(r.RemoteAddr)
		if err != nil {
			return netip.Prefix{}, err
		}
		return res.key(peer, unix, func() []string { return r.Header[header] }), nil
	}, nil
}

// An IPResolver finds the client of a request from its peer and the
// forwarding lines the peer sent, by ClientIP's rule under IPOptions (see
// NewIPResolver). It never changes, is safe for concurrent use, and
// allocates nothing.
type IPResolver struct {
	trusted      []netip.Prefix // masked, IPv4-mapped prefixes unmapped
	unixTrusted  bool
	header       proxyHeader
	bits4, bits6 int
}

// newResolver validates o and returns its resolver. The error describes
// the invalid option, without a package prefix: ClientIP and
// NewIPResolver wrap it in ErrConfig.
func newResolver(o IPOptions) (*IPResolver, error) {
	header, err := parseProxyHeader(o.Header)
	if err != nil {
		return nil, err
	}
	r := &IPResolver{bits4: o.IPv4Bits, bits6: o.IPv6Bits, unixTrusted: o.TrustUnixSocket, header: header}
	if r.bits4 == 0 {
		r.bits4 = 32
	}
	if r.bits6 == 0 {
		r.bits6 = 64
	}
	if r.bits4 < 1 || r.bits4 > 32 {
		return nil, fmt.Errorf("IPv4Bits %d (1 to 32)", o.IPv4Bits)
	}
	if r.bits6 < 1 || r.bits6 > 128 {
		return nil, fmt.Errorf("IPv6Bits %d (1 to 128)", o.IPv6Bits)
	}
	for _, p := range o.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("invalid trusted proxy prefix %v", p)
		}
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		r.trusted = append(r.trusted, netip.PrefixFrom(a.WithZone(""), bits).Masked())
	}
	return r, nil
}

// NewIPResolver returns ClientIP's rule under o for a door of another
// protocol, one that finds a request's peer and forwarding field its own
// way: grpclimit's ClientIP is this rule over a call's peer and its
// incoming metadata. Invalid options are ErrConfig.
func NewIPResolver(o IPOptions) (*IPResolver, error) {
	res, err := newResolver(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return res, nil
}

// Client returns the client's prefix of a request whose peer is peer
// (IPv4-mapped addresses are unmapped and zones dropped; the zero Addr
// stands for a unix-socket peer, see IPOptions.TrustUnixSocket) and whose
// forwarding field (the one IPOptions.Header names) has the lines values
// returns: header lines, or metadata values. values is called only when
// the peer is a trusted proxy. The prefix is the one ClientIP keys an HTTP
// request with; Client allocates nothing but what values does.
func (r *IPResolver) Client(peer netip.Addr, values func() []string) netip.Prefix {
	if !peer.IsValid() {
		return r.key(netip.IPv6Unspecified(), true, values)
	}
	return r.key(normalize(peer), false, values)
}

// RemoteIP keys a request on RemoteAddr alone, IPv6 grouped by /64 and IPv4
// by /32: ClientIP with zero IPOptions.
func RemoteIP(r *http.Request) (netip.Prefix, error) {
	a, _, err := remotePeer(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}, err
	}
	return mask(a, 32, 64), nil
}

// remotePeer parses RemoteAddr: an address ("ip:port", "[ip6]:port" or a
// bare address), normalized, or a unix-socket peer (see
// IPOptions.TrustUnixSocket), whose address is the unspecified one (::).
func remotePeer(s string) (a netip.Addr, unix bool, err error) {
	if a, ok := parsePeer(s); ok {
		return a, false, nil
	}
	if isUnixPeer(s) {
		return netip.IPv6Unspecified(), true, nil
	}
	return netip.Addr{}, false, fmt.Errorf("%w: %q", ErrRemoteAddr, s)
}
