package httplimit

import (
	"net/netip"
	"strings"
)

// This file finds a request's client address behind trusted proxies
// (ClientIP, IPResolver). Only when the peer is a trusted proxy are the
// forwarding field's lines read at all. A list (X-Forwarded-For,
// Forwarded) is read from the right, skipping trusted hops: the first
// untrusted entry is the client. Entries to its left were written by the
// client or by proxies we do not trust and are never looked at, so spoofed
// entries change nothing. An entry that is not an address ("unknown", an
// obfuscated identifier, garbage) ends the walk at the trusted hop that
// forwarded it. X-Real-IP is one address, which the trusted proxy sets: it
// is the client.
//
// Both lists take an address in the same forms (splitAddr): IPv4 or IPv6
// alone, IPv4 with a port, IPv6 in brackets with or without a port; a
// Forwarded node quotes them, as RFC 7239 requires of IPv6.

// trusts reports whether the peer is a trusted proxy, whose forwarding
// lines are to be read: a TCP peer (peer, normalized) in a trusted
// network, or a unix-socket peer (unix) when TrustUnixSocket is set.
func (r *IPResolver) trusts(peer netip.Addr, unix bool) bool {
	if unix {
		return r.unixTrusted
	}
	return r.isTrusted(peer)
}

func (r *IPResolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// key returns the key of a request whose peer is peer (normalized; the
// unspecified address for a unix-socket peer, unix) and whose forwarding
// field has the lines that lines returns: it is called only if the peer is
// trusted, so that a door reads the field of no other request (and gRPC
// copies no metadata for it). key allocates nothing but what lines does.
func (r *IPResolver) key(peer netip.Addr, unix bool, lines func() []string) netip.Prefix {
	if !r.trusts(peer, unix) {
		return mask(peer, r.bits4, r.bits6)
	}
	return r.walked(peer, true, lines())
}

// walked returns the key of a request whose peer is peer (the unspecified
// address for a unix-socket peer) and whose forwarding lines are lines:
// the client, masked to its prefix. lines is read only if the peer is
// trusted (trusted = trusts(peer, unix)), so a caller passes nil otherwise.
func (r *IPResolver) walked(peer netip.Addr, trusted bool, lines []string) netip.Prefix {
	client := peer
	if trusted {
		client = r.walk(lines, peer)
	}
	return mask(client, r.bits4, r.bits6)
}

// walk returns the client address that the lines, forwarded to us by the
// trusted peer, name: the rightmost untrusted entry of a list, or the one
// address of X-Real-IP. Requires that peer is trusted.
func (r *IPResolver) walk(lines []string, peer netip.Addr) netip.Addr {
	if r.header == xRealIP {
		return realIP(lines, peer)
	}
	forwarded := r.header == forwarded
	last := peer // the nearest hop we can vouch for
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for s != "" {
			var entry string
			var ok bool
			if forwarded {
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
			if forwarded {
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

// realIP returns the address of an X-Real-IP field, forwarded to us by the
// trusted peer: one line holding one address, in any form an
// X-Forwarded-For entry takes. It is the client even if it is a trusted
// address (as the leftmost entry of a list of trusted ones is). Anything
// else (no line, two lines, a list, garbage) is not an address the proxy
// set: the key is then the peer, the hop we can vouch for.
func realIP(lines []string, peer netip.Addr) netip.Addr {
	if len(lines) != 1 {
		return peer
	}
	if a, ok := parseXFFEntry(trimOWS(lines[0])); ok {
		return a
	}
	return peer
}

// parsePeer parses a peer address ("ip:port", "[ip6]:port" or a bare
// address), normalized. The common peer, "a.b.c.d:port", takes a path of
// its own (parsePeer4) that netip.ParseAddrPort would take three calls
// and a second scan for.
func parsePeer(s string) (netip.Addr, bool) {
	if a, ok := parsePeer4(s); ok {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	return netip.Addr{}, false
}

// parsePeer4 parses "a.b.c.d:port" exactly as netip.ParseAddrPort does:
// four decimal fields of 0 to 255 without leading zeros, and a port of
// decimal digits up to 65535 (leading zeros allowed, as strconv.ParseUint
// takes them). It returns false for anything else, which parsePeer then
// parses the general way (FuzzparsePeer4 holds the two to each other).
func parsePeer4(s string) (netip.Addr, bool) {
	var ip [4]byte
	i := 0
	for f := range 4 {
		if f > 0 {
			if i >= len(s) || s[i] != '.' {
				return netip.Addr{}, false
			}
			i++
		}
		start, v := i, 0
		for i < len(s) && i-start < 3 && '0' <= s[i] && s[i] <= '9' {
			v = v*10 + int(s[i]-'0')
			i++
		}
		if i == start || v > 255 || i-start > 1 && s[start] == '0' {
			return netip.Addr{}, false
		}
		ip[f] = byte(v)
	}
	if i+1 >= len(s) || s[i] != ':' {
		return netip.Addr{}, false
	}
	port := 0
	for i++; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return netip.Addr{}, false
		}
		if port = port*10 + int(c-'0'); port > 65535 {
			return netip.Addr{}, false
		}
	}
	return netip.AddrFrom4(ip), true
}

// isUnixPeer reports whether a peer address names a unix-socket peer: "@"
// (an unnamed or abstract socket), empty, or a path.
func isUnixPeer(s string) bool { return s == "" || s[0] == '@' || s[0] == '/' }

// normalize unmaps IPv4-mapped IPv6 addresses (::ffff:192.0.2.1 is the IPv4
// client 192.0.2.1, on a dual-stack listener) and drops zones, so that one
// client has one key.
func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// mask returns a's prefix of bits4 (IPv4) or bits6 (IPv6) bits, which must
// be valid lengths.
func mask(a netip.Addr, bits4, bits6 int) netip.Prefix {
	bits := bits6
	if a.Is4() {
		bits = bits4
	}
	p, _ := a.Prefix(bits) // cannot fail: bits validated, a valid
	return p
}

// parseXFFEntry parses one X-Forwarded-For entry: an address in any form
// splitAddr takes, with a port of 0 to 65535 if it has one
// ("192.0.2.1:4711", "[2001:db8::1]:4711") as some proxies write it.
func parseXFFEntry(s string) (netip.Addr, bool) {
	a, port, ok := splitAddr(s)
	if !ok || port != "" && !validPort(port) {
		return netip.Addr{}, false
	}
	return a, true
}

// validPort checks a ":" port: decimal digits, 0 to 65535, as
// netip.ParseAddrPort takes it (strconv.ParseUint, which allocates its
// error).
func validPort(p string) bool {
	if len(p) < 2 || p[0] != ':' {
		return false
	}
	v := 0
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return false
		}
		if v = v*10 + int(c-'0'); v > 65535 {
			return false
		}
	}
	return true
}

// splitAddr splits an address, as a proxy writes it into a forwarding
// field, into the address and the port that follows it (empty, or ":" and
// the rest, which the caller checks by its field's grammar). It takes IPv4
// or IPv6 alone ("192.0.2.1", "2001:db8::1"), IPv4 with a port
// ("192.0.2.1:80"), and IPv6 in brackets with or without a port
// ("[2001:db8::1]", "[2001:db8::1]:80"): a bracketed address without a
// port is unambiguous, and some proxies write it. The address is
// normalized (IPv4-mapped addresses unmapped, zones dropped), but a zone
// in brackets without a port ("[fe80::1%eth0]") is malformed.
//
// The form is told by the first byte and the colons before anything is
// parsed (an IPv6 address has two colons at least, IPv4 and a port one),
// so that no valid form is parsed twice: a failed netip.ParseAddr
// allocates its error.
func splitAddr(s string) (a netip.Addr, port string, ok bool) {
	if strings.HasPrefix(s, "[") {
		host := s
		if !strings.HasSuffix(s, "]") {
			// A port follows the last colon, as netip.ParseAddrPort reads
			// it: a zone may hold a "]".
			i := strings.LastIndexByte(s, ':')
			if i < 0 {
				return netip.Addr{}, "", false
			}
			host, port = s[:i], s[i:]
		}
		if len(host) < 2 || host[len(host)-1] != ']' {
			return netip.Addr{}, "", false
		}
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !a.Is6() || port == "" && a.Zone() != "" {
			return netip.Addr{}, "", false
		}
		return normalize(a), port, true
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		a, err := netip.ParseAddr(s[:i])
		if err != nil || !a.Is4() {
			return netip.Addr{}, "", false
		}
		return a, s[i:], true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, "", false
	}
	return normalize(a), "", true
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

// parseNode parses an RFC 7239 node, unquoted: an address in any form an
// X-Forwarded-For entry takes (splitAddr), and its node-port if it has
// one. "unknown" and obfuscated identifiers ("_hidden") are not addresses.
func parseNode(n string) (netip.Addr, bool) {
	a, port, ok := splitAddr(n)
	if !ok || !validNodePort(port) {
		return netip.Addr{}, false
	}
	return a, true
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
