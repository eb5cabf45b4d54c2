package httplimit

import (
	"encoding/base64"
	"math"
	"net/http"
	"strings"
	"time"
)

// This file reads what a provider's response says of its quota, for the
// Transport: the RateLimit field of draft-ietf-httpapi-ratelimit-headers
// (as the middleware writes it, parsed as RFC 9651 says) and Retry-After
// (RFC 9110, 10.2.3). Neither allocates.

// maxHold bounds a hold a provider can ask for: a year, beyond which a
// Retry-After is taken for a year (a bogus date must not hold a key for
// ever, nor overflow a Duration).
const maxHold = 365 * 24 * time.Hour

// parseRetryAfter returns the wait a Retry-After value v asks for, and false if
// v is neither delta-seconds nor an HTTP-date. A date is measured from the
// response's Date (date, if it parses; the provider's clock, so that a
// skew between the clocks does not count), else from now; a date past is
// no wait.
func parseRetryAfter(v string, date []string, now time.Time) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if s, ok := delaySeconds(v); ok {
		return s, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	from := now
	if len(date) > 0 {
		if d, err := http.ParseTime(date[0]); err == nil {
			from = d
		}
	}
	return min(max(at.Sub(from), 0), maxHold), true
}

// delaySeconds parses delta-seconds (1*DIGIT) as a duration, at most
// maxHold.
func delaySeconds(v string) (time.Duration, bool) {
	var s int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if s < int64(maxHold/time.Second) {
			s = s*10 + int64(c-'0')
		}
	}
	return min(time.Duration(s)*time.Second, maxHold), true
}

// quotaSpent reads the RateLimit field (its lines) and returns the longest
// reset (t, seconds) of an item whose remaining quota (r) is 0, and false
// if no item says its quota is spent and when it comes back. A line that
// is not a valid Structured Field List is ignored whole, as RFC 9651 asks
// of a field that fails to parse.
func quotaSpent(lines []string) (reset time.Duration, ok bool) {
	for _, l := range lines {
		if d, spent := spentIn(l); spent {
			reset, ok = max(reset, d), true
		}
	}
	return reset, ok
}

// spentIn is quotaSpent of one line.
func spentIn(line string) (reset time.Duration, ok bool) {
	if !strings.Contains(line, "r=0") && !strings.Contains(line, "r=-0") {
		return 0, false // no r of 0 (an Integer is digits, after a '-' if negative): nothing spent
	}
	p := sfScanner{s: line}
	p.skipSP()
	if p.done() {
		return 0, false
	}
	for {
		r, t, valid := p.member()
		if !valid {
			return 0, false
		}
		if r == 0 && t >= 0 {
			d := maxHold // capped before the product, which would overflow a Duration
			if t < int64(maxHold/time.Second) {
				d = time.Duration(t) * time.Second
			}
			reset, ok = max(reset, d), true
		}
		p.skipOWS()
		if p.done() {
			return reset, ok
		}
		if p.s[p.i] != ',' {
			return 0, false
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return 0, false // a trailing comma
		}
	}
}

// An sfScanner walks an RFC 9651 List (section 4.2), keeping only the
// integer parameters r and t of each member: RateLimit's remaining quota
// and its reset.
type sfScanner struct {
	s string
	i int
}

func (p *sfScanner) done() bool { return p.i >= len(p.s) }

func (p *sfScanner) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfScanner) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// member scans an Item or an Inner List with its parameters, and returns
// its r and t (-1 where absent or not integers) and whether it was valid.
func (p *sfScanner) member() (r, t int64, ok bool) {
	if !p.done() && p.s[p.i] == '(' {
		p.i++
		for {
			p.skipSP()
			if p.done() {
				return 0, 0, false
			}
			if p.s[p.i] == ')' {
				p.i++
				break
			}
			if _, ok := p.bareItem(); !ok {
				return 0, 0, false
			}
			if _, _, ok := p.params(); !ok {
				return 0, 0, false
			}
			if !p.done() && p.s[p.i] != ' ' && p.s[p.i] != ')' {
				return 0, 0, false
			}
		}
	} else if _, ok := p.bareItem(); !ok {
		return 0, 0, false
	}
	return p.params()
}

// params scans the parameters after an item, keeping r and t.
func (p *sfScanner) params() (r, t int64, ok bool) {
	r, t = -1, -1
	for !p.done() && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		start := p.i
		if p.done() || !(isLower(p.s[p.i]) || p.s[p.i] == '*') {
			return 0, 0, false
		}
		for p.i < len(p.s) && (isLower(p.s[p.i]) || isDigit(p.s[p.i]) || p.s[p.i] == '_' || p.s[p.i] == '-' || p.s[p.i] == '.' || p.s[p.i] == '*') {
			p.i++
		}
		key := p.s[start:p.i]
		v := int64(-1) // true, and any value but an integer ≥ 0
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			var ok bool
			if v, ok = p.bareItem(); !ok {
				return 0, 0, false
			}
		}
		// A parameter named again overrides its value (RFC 9651, 4.2.3.2).
		switch key {
		case "r":
			r = v
		case "t":
			t = v
		}
	}
	return r, t, true
}

// bareItem scans a Bare Item and returns its value if it is an Integer ≥
// 0 (-1 for any other value), and whether it was valid.
func (p *sfScanner) bareItem() (int64, bool) {
	if p.done() {
		return 0, false
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return -1, p.quoted()
	case c == '*' || isAlpha(c):
		p.i++
		for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
			p.i++
		}
		return -1, true
	case c == ':': // a Byte Sequence: base64, which must decode
		end := strings.IndexByte(p.s[p.i+1:], ':')
		if end < 0 {
			return 0, false
		}
		enc := p.s[p.i+1 : p.i+1+end]
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; !isAlnum(c) && c != '+' && c != '/' && c != '=' {
				return 0, false
			}
		}
		var buf [96]byte // a pk of up to 96 bytes decodes on the stack
		if _, err := base64.StdEncoding.AppendDecode(buf[:0], []byte(enc)); err != nil {
			return 0, false
		}
		p.i += end + 2
		return -1, true
	case c == '?': // a Boolean
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return -1, true
		}
		return 0, false
	case c == '@': // a Date
		p.i++
		if _, ok := p.number(); !ok {
			return 0, false
		}
		return -1, true
	case c == '%': // a Display String
		p.i++
		if p.done() || p.s[p.i] != '"' {
			return 0, false
		}
		return -1, p.quoted()
	}
	return 0, false
}

// number scans an Integer or a Decimal, and returns an Integer's value if
// it is ≥ 0 (-1 for any other number).
func (p *sfScanner) number() (int64, bool) {
	neg := p.s[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var v int64
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		if p.i-start == 15 {
			return 0, false // an Integer has at most 15 digits
		}
		v = v*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 {
		return 0, false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' { // a Decimal: 1 to 12 digits, then 1 to 3
		if digits > 12 {
			return 0, false
		}
		p.i++
		frac := p.i
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
		if n := p.i - frac; n < 1 || n > 3 {
			return 0, false
		}
		return -1, true
	}
	if neg && v != 0 || v > math.MaxInt64/2 { // -0 is 0
		return -1, true
	}
	return v, true
}

// quoted scans a String: printable ASCII in quotes, \" and \\ escaped.
func (p *sfScanner) quoted() bool {
	p.i++ // the opening quote
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return false
			}
			p.i++
		case c == '"':
			return true
		case c < 0x20 || c > 0x7e:
			return false
		}
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || c >= 'A' && c <= 'Z' }

// isTokenChar reports whether c may follow a Token's first character:
// tchar, ':' or '/' (RFC 9651, 3.3.4).
func isTokenChar(c byte) bool {
	return isAlnum(c) || c == ':' || c == '/' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
