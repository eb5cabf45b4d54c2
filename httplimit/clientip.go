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

// ErrIPOptions is returned by ClientIP for invalid options.
var ErrIPOptions = errors.New("httplimit: invalid client-IP options")

// A ProxyHeader names the forwarding header a trusted proxy sets.
type ProxyHeader uint8

const (
	// XForwardedFor is the de-facto X-Forwarded-For header: a comma-separated
	// list of addresses, each proxy appending the address it received the
	// request from.
	XForwardedFor ProxyHeader = iota
	// Forwarded is the RFC 7239 Forwarded header; the for= parameter of each
	// element is the address the appending proxy received the request from.
	Forwarded
)

func (h ProxyHeader) String() string {
	switch h {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return fmt.Sprintf("ProxyHeader(%d)", uint8(h))
}

// IPOptions configures ClientIP. The zero value keys on RemoteAddr alone,
// with IPv6 addresses grouped by /64 and IPv4 addresses kept whole (/32).
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
	// Header is the forwarding header the trusted proxies set
	// (XForwardedFor by default). Only that one is read: a proxy that sets
	// one header passes the other through from the client untouched.
	Header ProxyHeader
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
//     spoofed leftmost entries change nothing.
//  4. An entry that is not an address ("unknown", an obfuscated
//     identifier, garbage) ends the walk: the key is then the trusted hop
//     that forwarded it, the last address we can vouch for. If every entry
//     is trusted, the leftmost is the client.
func ClientIP(o IPOptions) (KeyFunc[netip.Prefix], error) {
	k, err := newIPKeyer(o)
	if err != nil {
		return nil, err
	}
	return k.key, nil
}

// RemoteIP keys a request on RemoteAddr alone, IPv6 grouped by /64 and IPv4
// by /32: ClientIP with zero IPOptions.
func RemoteIP(r *http.Request) (netip.Prefix, error) {
	a, err := remoteAddr(r.RemoteAddr)
	if err != nil {
		if !isUnixPeer(r.RemoteAddr) {
			return netip.Prefix{}, err
		}
		a = netip.IPv6Unspecified() // a unix-socket peer (see IPOptions.TrustUnixSocket)
	}
	return mask(a, 32, 64), nil
}

type ipKeyer struct {
	trusted      []netip.Prefix
	unixTrusted  bool   // a unix-socket peer is a trusted proxy
	header       string // canonical header name
	forwarded    bool   // RFC 7239 syntax
	bits4, bits6 int
}

func newIPKeyer(o IPOptions) (*ipKeyer, error) {
	k := &ipKeyer{bits4: o.IPv4Bits, bits6: o.IPv6Bits, unixTrusted: o.TrustUnixSocket}
	if k.bits4 == 0 {
		k.bits4 = 32
	}
	if k.bits6 == 0 {
		k.bits6 = 64
	}
	if k.bits4 < 1 || k.bits4 > 32 {
		return nil, fmt.Errorf("%w: IPv4Bits %d (1 to 32)", ErrIPOptions, o.IPv4Bits)
	}
	if k.bits6 < 1 || k.bits6 > 128 {
		return nil, fmt.Errorf("%w: IPv6Bits %d (1 to 128)", ErrIPOptions, o.IPv6Bits)
	}
	switch o.Header {
	case XForwardedFor:
		k.header = "X-Forwarded-For"
	case Forwarded:
		k.header, k.forwarded = "Forwarded", true
	default:
		return nil, fmt.Errorf("%w: %v", ErrIPOptions, o.Header)
	}
	for _, p := range o.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("%w: invalid trusted proxy prefix %v", ErrIPOptions, p)
		}
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		k.trusted = append(k.trusted, netip.PrefixFrom(a.WithZone(""), bits).Masked())
	}
	return k, nil
}

func (k *ipKeyer) key(r *http.Request) (netip.Prefix, error) {
	peer, err := remoteAddr(r.RemoteAddr)
	unix := err != nil && isUnixPeer(r.RemoteAddr)
	if err != nil && !unix {
		return netip.Prefix{}, err
	}
	if unix {
		peer = netip.IPv6Unspecified()
	}
	client := peer
	if (unix && k.unixTrusted) || (!unix && k.isTrusted(peer)) {
		client = k.walk(r.Header[k.header], peer)
	}
	return mask(client, k.bits4, k.bits6), nil
}

// isUnixPeer reports whether RemoteAddr names a unix-socket peer: "@" (an
// unnamed or abstract socket), empty, or a path.
func isUnixPeer(s string) bool { return s == "" || s[0] == '@' || s[0] == '/' }

func (k *ipKeyer) isTrusted(a netip.Addr) bool {
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// walk returns the client address that the header lines, forwarded to us by
// the trusted peer, name: the rightmost untrusted entry. Requires that peer
// is trusted.
func (k *ipKeyer) walk(lines []string, peer netip.Addr) netip.Addr {
	last := peer // the nearest hop we can vouch for
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for s != "" {
			var entry string
			var ok bool
			if k.forwarded {
				s, entry, ok = cutLast(s, ',')
			} else {
				s, entry, ok = cutLastPlain(s, ',')
			}
			if !ok {
				return last
			}
			entry = trimOWS(entry)
			if entry == "" {
				continue // empty list elements are allowed (RFC 9110, 5.6.1)
			}
			var a netip.Addr
			if k.forwarded {
				a, ok = forwardedFor(entry)
			} else {
				a, ok = parseXFFEntry(entry)
			}
			if !ok {
				return last
			}
			if !k.isTrusted(a) {
				return a
			}
			last = a
		}
	}
	return last
}

// remoteAddr parses RemoteAddr ("ip:port", "[ip6]:port" or a bare address).
func remoteAddr(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), nil
	}
	return netip.Addr{}, fmt.Errorf("%w: %q", ErrRemoteAddr, s)
}

// normalize unmaps IPv4-mapped IPv6 addresses (::ffff:192.0.2.1 is the IPv4
// client 192.0.2.1, on a dual-stack listener) and drops zones, so that one
// client has one key.
func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

func mask(a netip.Addr, bits4, bits6 int) netip.Prefix {
	bits := bits6
	if a.Is4() {
		bits = bits4
	}
	p, _ := a.Prefix(bits) // cannot fail: bits validated, a valid
	return p
}

// parseXFFEntry parses one X-Forwarded-For entry: an address, optionally
// with a port ("192.0.2.1:4711", "[2001:db8::1]:4711") as some proxies write.
func parseXFFEntry(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		// "[2001:db8::1]": a bracketed IPv6 address without a port, as some
		// proxies write it. Unambiguous, so accepted.
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

// cutLastPlain splits s at its last sep: s = rest + sep + elem. No quoting.
func cutLastPlain(s string, sep byte) (rest, elem string, ok bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return "", s, true
}

// cutLast splits s at its last sep outside quoted strings, scanning from the
// right: s = rest + sep + elem (rest = "" when there is none). ok is false if
// a quoted string has no opening quote.
//
// Scanning from the right is what makes spoofing harmless: the elements on
// the right were written by our trusted proxies, so they are read the same
// way whatever a client put further left. Inside a quoted string a quote is
// escaped exactly when an odd number of backslashes precede it (RFC 9110,
// 5.6.4: a backslash always escapes the next character).
func cutLast(s string, sep byte) (rest, elem string, ok bool) {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case sep:
			return s[:i], s[i+1:], true
		case '"':
			j := i - 1
			for ; j >= 0; j-- {
				if s[j] == '"' && backslashesBefore(s, j)%2 == 0 {
					break
				}
			}
			if j < 0 {
				return "", "", false
			}
			i = j
		}
	}
	return "", s, true
}

func backslashesBefore(s string, i int) int {
	n := 0
	for i--; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// forwardedFor returns the address in the for= parameter of one RFC 7239
// forwarded-element. ok is false if the element is malformed, has no for=
// or more than one, or its node is "unknown" or obfuscated.
func forwardedFor(elem string) (netip.Addr, bool) {
	var node string
	var bare netip.Addr // an unquoted bare IPv6 address
	found := false
	for elem != "" {
		var pair string
		var ok bool
		elem, pair, ok = cutLast(elem, ';')
		if !ok {
			return netip.Addr{}, false
		}
		pair = trimOWS(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok || !isToken(name) {
			return netip.Addr{}, false
		}
		if !strings.EqualFold(name, "for") {
			continue
		}
		if found {
			return netip.Addr{}, false // a parameter occurs at most once (RFC 7239, 4)
		}
		found = true
		if node, ok = unquote(value); !ok {
			// for=2001:db8::1 unquoted, as a naive for=$remote_addr writes
			// it: not a token (RFC 7239 wants it quoted and bracketed), but
			// if the whole value is one IPv6 address and nothing else it is
			// unambiguous, and accepted below. Anything else is rejected.
			a, err := netip.ParseAddr(value)
			if err != nil || !a.Is6() || a.Zone() != "" {
				return netip.Addr{}, false
			}
			bare = normalize(a)
		}
	}
	if !found {
		return netip.Addr{}, false
	}
	if bare.IsValid() {
		return bare, true
	}
	return parseNode(node)
}

// unquote returns a token as is and a quoted string without its quotes; a
// quoted string with escapes is rejected (no address needs one).
func unquote(v string) (string, bool) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
		return v, !strings.ContainsAny(v, "\\\"")
	}
	return v, isToken(v)
}

// parseNode parses an RFC 7239 node: IPv4 [":" port] or "[" IPv6 "]" [":" port].
// "unknown" and obfuscated identifiers ("_hidden") are not addresses.
func parseNode(n string) (netip.Addr, bool) {
	host, port := n, ""
	if strings.HasPrefix(n, "[") {
		end := strings.IndexByte(n, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = n[1:end], n[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return normalize(a), validNodePort(port)
	}
	if a, err := netip.ParseAddr(n); err == nil && a.Is6() && a.Zone() == "" {
		return normalize(a), true // "2001:db8::1" quoted but not bracketed: one address, no port
	}
	if i := strings.IndexByte(n, ':'); i >= 0 {
		host, port = n[:i], n[i:]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, validNodePort(port)
}

// validNodePort checks an optional ":" node-port: 1 to 5 digits, or an
// obfuscated port ("_" followed by ALPHA / DIGIT / "." / "_" / "-").
func validNodePort(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != ':' || len(p) < 2 {
		return false
	}
	p = p[1:]
	if p[0] == '_' {
		for i := 1; i < len(p); i++ {
			c := p[i]
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return len(p) > 1
	}
	if len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }
