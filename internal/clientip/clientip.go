// Package clientip finds a request's client address behind trusted
// proxies, for every door: httplimit reads the forwarding header of an HTTP
// request, grpclimit the same field in a call's metadata. It knows nothing
// of either protocol: a door gives it the peer's address and the field's
// lines (one per header line, or per metadata value).
//
// Only when the peer is a trusted proxy are the lines read at all, from
// the right, skipping trusted hops: the first untrusted entry is the
// client. Entries to its left were written by the client or by proxies we
// do not trust and are never looked at, so spoofed entries change nothing.
// An entry that is not an address ("unknown", an obfuscated identifier,
// garbage) ends the walk at the trusted hop that forwarded it.
package clientip

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/atomiclimit/atomiclimit/internal/httpsyntax"
)

// Options configures a Resolver. Bits are the prefix lengths clients are
// grouped by (0: 32 for IPv4, 64 for IPv6).
type Options struct {
	Trusted      []netip.Prefix // the trusted proxies' networks
	Forwarded    bool           // the lines are RFC 7239 Forwarded, not X-Forwarded-For
	Bits4, Bits6 int
	TrustUnix    bool // a unix-socket peer is a trusted proxy
}

// A Resolver finds the client of a request from its peer and the
// forwarding lines the peer sent. It never changes after New, and is safe
// for concurrent use; it allocates nothing.
type Resolver struct {
	trusted      []netip.Prefix // masked, IPv4-mapped prefixes unmapped
	unixTrusted  bool
	forwarded    bool
	bits4, bits6 int
}

// New validates o and returns its Resolver. The error describes the
// invalid option, without a package prefix: the door wraps it in its own
// sentinel.
func New(o Options) (*Resolver, error) {
	r := &Resolver{bits4: o.Bits4, bits6: o.Bits6, unixTrusted: o.TrustUnix, forwarded: o.Forwarded}
	if r.bits4 == 0 {
		r.bits4 = 32
	}
	if r.bits6 == 0 {
		r.bits6 = 64
	}
	if r.bits4 < 1 || r.bits4 > 32 {
		return nil, fmt.Errorf("IPv4Bits %d (1 to 32)", o.Bits4)
	}
	if r.bits6 < 1 || r.bits6 > 128 {
		return nil, fmt.Errorf("IPv6Bits %d (1 to 128)", o.Bits6)
	}
	for _, p := range o.Trusted {
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

// Trusts reports whether the peer is a trusted proxy, whose forwarding
// lines are to be read: a TCP peer (peer, normalized) in a trusted
// network, or a unix-socket peer (unix) when TrustUnix is set.
func (r *Resolver) Trusts(peer netip.Addr, unix bool) bool {
	if unix {
		return r.unixTrusted
	}
	return r.isTrusted(peer)
}

func (r *Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the key of a request whose peer is peer (the unspecified
// address for a unix-socket peer) and whose forwarding lines are lines:
// the client, masked to its prefix. lines is read only if the peer is
// trusted (trusted = Trusts(peer, unix)), so a door passes nil otherwise.
func (r *Resolver) Client(peer netip.Addr, trusted bool, lines []string) netip.Prefix {
	client := peer
	if trusted {
		client = r.walk(lines, peer)
	}
	return Mask(client, r.bits4, r.bits6)
}

// walk returns the client address that the lines, forwarded to us by the
// trusted peer, name: the rightmost untrusted entry. Requires that peer is
// trusted.
func (r *Resolver) walk(lines []string, peer netip.Addr) netip.Addr {
	last := peer // the nearest hop we can vouch for
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for s != "" {
			var entry string
			var ok bool
			if r.forwarded {
				s, entry, ok = cutLast(s, ',')
			} else {
				s, entry, ok = cutLastPlain(s, ',')
			}
			if !ok {
				return last
			}
			entry = httpsyntax.TrimOWS(entry)
			if entry == "" {
				continue // empty list elements are allowed (RFC 9110, 5.6.1)
			}
			var a netip.Addr
			if r.forwarded {
				a, ok = forwardedFor(entry)
			} else {
				a, ok = parseXFFEntry(entry)
			}
			if !ok {
				return last
			}
			if !r.isTrusted(a) {
				return a
			}
			last = a
		}
	}
	return last
}

// ParsePeer parses a peer address ("ip:port", "[ip6]:port" or a bare
// address), normalized.
func ParsePeer(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Normalize(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return Normalize(a), true
	}
	return netip.Addr{}, false
}

// IsUnixPeer reports whether a peer address names a unix-socket peer: "@"
// (an unnamed or abstract socket), empty, or a path.
func IsUnixPeer(s string) bool { return s == "" || s[0] == '@' || s[0] == '/' }

// Normalize unmaps IPv4-mapped IPv6 addresses (::ffff:192.0.2.1 is the IPv4
// client 192.0.2.1, on a dual-stack listener) and drops zones, so that one
// client has one key.
func Normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// Mask returns a's prefix of bits4 (IPv4) or bits6 (IPv6) bits, which must
// be valid lengths.
func Mask(a netip.Addr, bits4, bits6 int) netip.Prefix {
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
		return Normalize(a), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		// "[2001:db8::1]": a bracketed IPv6 address without a port, as some
		// proxies write it. Unambiguous, so accepted.
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
		pair = httpsyntax.TrimOWS(pair)
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok || !httpsyntax.IsToken(name) {
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
			bare = Normalize(a)
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
	return v, httpsyntax.IsToken(v)
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
		return Normalize(a), validNodePort(port)
	}
	if a, err := netip.ParseAddr(n); err == nil && a.Is6() && a.Zone() == "" {
		return Normalize(a), true // "2001:db8::1" quoted but not bracketed: one address, no port
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
