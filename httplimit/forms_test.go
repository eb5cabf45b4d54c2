package httplimit

// This file holds, for the tests of the client address, the forms an
// address takes in a forwarding field and the key each form gives:
// X-Forwarded-For, Forwarded and X-Real-IP read every form alike.
// (grpclimit's tests hold a copy, for its metadata.)

import "net/netip"

// caseTrusted is the network of the trusted proxies, and casePeer
// ("10.0.0.1") a proxy in it that sends the cases. casePeerKey is
// casePeer's key: the key of a case whose address is malformed.
var caseTrusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}

const (
	casePeer    = "10.0.0.1"
	casePeerKey = "10.0.0.1/32"
)

// A fieldCase is what a trusted proxy sends in one field, and the key it
// gives.
type fieldCase struct {
	Name   string
	Header string
	Lines  []string // the field's lines (header lines, metadata values)
	Key    string   // the client's prefix
}

// forms are the forms of an address; key "" for a malformed one.
// unquoted: Forwarded takes it unquoted too (for=2001:db8::1, as a naive
// for=$remote_addr writes it): a bare IPv6 address without a zone.
var addrForms = []struct {
	name, addr, key string
	unquoted        bool
}{
	{"IPv6", "2001:db8:1:2::9", "2001:db8:1:2::/64", true},
	{"IPv6 in upper case", "2001:DB8:1:2::9", "2001:db8:1:2::/64", true},
	{"IPv6 loopback", "::1", "::/64", true},
	{"IPv6 whose last group looks like a port", "2001:db8::1:443", "2001:db8::/64", true},
	{"IPv4-mapped IPv6", "::ffff:203.0.113.9", "203.0.113.9/32", true},
	{"bracketed IPv6", "[2001:db8:1:2::9]", "2001:db8:1:2::/64", false},
	{"bracketed IPv6 with a port", "[2001:db8:1:2::9]:4711", "2001:db8:1:2::/64", false},
	{"bracketed IPv6 with port 0", "[2001:db8:1:2::9]:0", "2001:db8:1:2::/64", false},
	{"bracketed IPv4-mapped IPv6", "[::ffff:203.0.113.9]", "203.0.113.9/32", false},
	{"bracketed IPv4-mapped IPv6 with a port", "[::ffff:203.0.113.9]:443", "203.0.113.9/32", false},
	{"zone dropped", "fe80::1%eth0", "fe80::/64", false},
	{"zone dropped, bracketed with a port", "[fe80::1%eth0]:443", "fe80::/64", false},
	{"zone in brackets without a port", "[fe80::1%eth0]", "", false},
	{"empty zone", "[2001:db8::1%]:443", "", false},
	{"IPv4", "203.0.113.9", "203.0.113.9/32", false},
	{"IPv4 with a port", "203.0.113.9:4711", "203.0.113.9/32", false},
	{"bracketed IPv4", "[203.0.113.9]", "", false},
	{"bracketed IPv4 with a port", "[203.0.113.9]:443", "", false},
	{"unterminated bracket", "[2001:db8::1", "", false},
	{"stray bracket", "2001:db8::1]", "", false},
	{"empty brackets", "[]", "", false},
	{"empty port", "[2001:db8::1]:", "", false},
	{"port not a number", "[2001:db8::1]:https", "", false},
	{"port without a colon", "[2001:db8::1]443", "", false},
	{"a prefix", "2001:db8::/64", "", false},
	{"unknown", "unknown", "", false},
}

// fieldCases returns every form in every field: as it is in X-Forwarded-For and
// X-Real-IP, quoted in Forwarded (for="…", as RFC 7239 requires of IPv6),
// and unquoted there too where a bare IPv6 address is accepted. Then the
// cases of X-Real-IP's own rule: one line holding one address, or the key
// is the peer's.
func fieldCases() []fieldCase {
	var cs []fieldCase
	for _, f := range addrForms {
		key := f.key
		if key == "" {
			key = casePeerKey
		}
		cs = append(cs,
			fieldCase{f.name, "X-Forwarded-For", []string{f.addr}, key},
			fieldCase{f.name, "X-Real-IP", []string{f.addr}, key},
			fieldCase{f.name + ", quoted", "Forwarded", []string{`for="` + f.addr + `"`}, key})
		if f.unquoted {
			cs = append(cs, fieldCase{f.name + ", unquoted", "Forwarded", []string{"for=" + f.addr}, key})
		}
	}
	return append(cs,
		// RFC 7239 wants an IPv6 node quoted; a bare one is taken unquoted
		// only without a zone.
		fieldCase{"zone, unquoted", "Forwarded", []string{"for=fe80::1%eth0"}, casePeerKey},
		fieldCase{"surrounding whitespace", "X-Real-IP", []string{" 203.0.113.9 "}, "203.0.113.9/32"},
		fieldCase{"a trusted address is the client", "X-Real-IP", []string{"10.9.9.9"}, "10.9.9.9/32"},
		fieldCase{"no line: the peer", "X-Real-IP", nil, casePeerKey},
		fieldCase{"empty", "X-Real-IP", []string{""}, casePeerKey},
		fieldCase{"two lines: the peer", "X-Real-IP", []string{"198.51.100.1", "203.0.113.9"}, casePeerKey},
		fieldCase{"a list: the peer", "X-Real-IP", []string{"198.51.100.1, 203.0.113.9"}, casePeerKey},
		fieldCase{"the same list in X-Forwarded-For", "X-Forwarded-For", []string{"198.51.100.1, 203.0.113.9"}, "203.0.113.9/32"},
	)
}
