package httplimit

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A strict parser for RFC 9651 (Structured Field Values) Lists, following
// the parsing algorithms of its section 4.2, used to check that the headers
// we write parse as the draft says they must. Written from the RFC, sharing
// no code with the serializer under test.

type sfToken string // a Token bare item, distinct from a String
type sfParam struct {
	key   string
	value any
}
type sfItem struct {
	value  any // int64, float64 (decimal), string, sfToken, []byte, bool, []sfItem (inner list)
	params []sfParam
}

func (it sfItem) param(key string) (any, bool) {
	for _, p := range it.params {
		if p.key == key {
			return p.value, true
		}
	}
	return nil, false
}

var errSF = errors.New("sf: parse error")

func sfFail(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errSF, fmt.Sprintf(format, a...))
}

// parseSFList parses a List field value (the lines already joined with ", ").
func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfItem
	for !p.done() {
		it, err := p.itemOrInnerList()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skipOWS()
		if p.done() {
			return out, nil
		}
		if p.s[0] != ',' {
			return nil, sfFail("expected ',' at %q", p.s)
		}
		p.s = p.s[1:]
		p.skipOWS()
		if p.done() {
			return nil, sfFail("trailing comma")
		}
	}
	return out, nil
}

type sfParser struct{ s string }

func (p *sfParser) done() bool { return len(p.s) == 0 }
func (p *sfParser) skipSP()    { p.s = strings.TrimLeft(p.s, " ") }
func (p *sfParser) skipOWS()   { p.s = strings.TrimLeft(p.s, " \t") }

func (p *sfParser) itemOrInnerList() (sfItem, error) {
	if !p.done() && p.s[0] == '(' {
		p.s = p.s[1:]
		var inner []sfItem
		for {
			p.skipSP()
			if p.done() {
				return sfItem{}, sfFail("unterminated inner list")
			}
			if p.s[0] == ')' {
				p.s = p.s[1:]
				params, err := p.params()
				return sfItem{value: inner, params: params}, err
			}
			it, err := p.item()
			if err != nil {
				return sfItem{}, err
			}
			inner = append(inner, it)
			if p.done() || (p.s[0] != ' ' && p.s[0] != ')') {
				return sfItem{}, sfFail("bad inner list at %q", p.s)
			}
		}
	}
	return p.item()
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	params, err := p.params()
	return sfItem{value: v, params: params}, err
}

func (p *sfParser) params() ([]sfParam, error) {
	var out []sfParam
	for !p.done() && p.s[0] == ';' {
		p.s = p.s[1:]
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		var v any = true
		if !p.done() && p.s[0] == '=' {
			p.s = p.s[1:]
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		replaced := false
		for i := range out {
			if out[i].key == k { // RFC 9651: a repeated key overwrites
				out[i].value, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, sfParam{k, v})
		}
	}
	return out, nil
}

func (p *sfParser) key() (string, error) {
	if p.done() || !(p.s[0] >= 'a' && p.s[0] <= 'z' || p.s[0] == '*') {
		return "", sfFail("bad key start at %q", p.s)
	}
	i := 1
	for i < len(p.s) && (p.s[i] >= 'a' && p.s[i] <= 'z' || p.s[i] >= '0' && p.s[i] <= '9' || strings.IndexByte("_-.*", p.s[i]) >= 0) {
		i++
	}
	k := p.s[:i]
	p.s = p.s[i:]
	return k, nil
}

func (p *sfParser) bareItem() (any, error) {
	if p.done() {
		return nil, sfFail("empty bare item")
	}
	switch c := p.s[0]; {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return p.token(), nil
	case c == ':':
		return p.bytes()
	case c == '?':
		if len(p.s) >= 2 && (p.s[1] == '0' || p.s[1] == '1') {
			b := p.s[1] == '1'
			p.s = p.s[2:]
			return b, nil
		}
		return nil, sfFail("bad boolean")
	}
	return nil, sfFail("unknown bare item at %q", p.s)
}

func (p *sfParser) number() (any, error) {
	i, neg := 0, false
	if p.s[0] == '-' {
		i, neg = 1, true
	}
	start, dot := i, -1
	for ; i < len(p.s); i++ {
		c := p.s[i]
		if c >= '0' && c <= '9' {
			continue
		}
		if c == '.' && dot < 0 {
			dot = i
			continue
		}
		break
	}
	num := p.s[start:i]
	if num == "" || num[0] < '0' || num[0] > '9' {
		return nil, sfFail("number without digits")
	}
	p.s = p.s[i:]
	if dot < 0 {
		if len(num) > 15 {
			return nil, sfFail("integer too long")
		}
		v, _ := strconv.ParseInt(num, 10, 64)
		if neg {
			v = -v
		}
		return v, nil
	}
	ip, fp, _ := strings.Cut(num, ".")
	if len(ip) > 12 || len(fp) < 1 || len(fp) > 3 {
		return nil, sfFail("bad decimal %q", num)
	}
	v, _ := strconv.ParseFloat(num, 64)
	if neg {
		v = -v
	}
	return v, nil
}

func (p *sfParser) str() (any, error) {
	var b strings.Builder
	for i := 1; i < len(p.s); i++ {
		c := p.s[i]
		switch {
		case c == '\\':
			i++
			if i == len(p.s) || (p.s[i] != '"' && p.s[i] != '\\') {
				return nil, sfFail("bad escape in string")
			}
			b.WriteByte(p.s[i])
		case c == '"':
			p.s = p.s[i+1:]
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return nil, sfFail("bad character %#x in string", c)
		default:
			b.WriteByte(c)
		}
	}
	return nil, sfFail("unterminated string")
}

func (p *sfParser) token() sfToken {
	i := 1
	for i < len(p.s) && (isToken(p.s[i:i+1]) || p.s[i] == ':' || p.s[i] == '/') {
		i++
	}
	t := sfToken(p.s[:i])
	p.s = p.s[i:]
	return t
}

func (p *sfParser) bytes() (any, error) {
	end := strings.IndexByte(p.s[1:], ':')
	if end < 0 {
		return nil, sfFail("unterminated byte sequence")
	}
	enc := p.s[1 : 1+end]
	for i := 0; i < len(enc); i++ {
		if !isAlnum(enc[i]) && strings.IndexByte("+/=", enc[i]) < 0 {
			return nil, sfFail("bad base64 character")
		}
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, sfFail("bad base64: %v", err)
	}
	p.s = p.s[2+end:]
	return b, nil
}

// TestSFParser checks the test parser itself on the RFC's examples and on
// strings it must reject, so that the header tests that rely on it can fail.
func TestSFParser(t *testing.T) {
	good := []struct {
		in   string
		want string // fmt of the parsed list
	}{
		{`"default";q=100;w=10`, `[{default [{q 100} {w 10}]}]`},
		{`"permin";q=50;w=60,"perhr";q=1000;w=3600`, `[{permin [{q 50} {w 60}]} {perhr [{q 1000} {w 3600}]}]`},
		{`"a\"b\\c";r=0`, `[{a"b\c [{r 0}]}]`},
		{`sugar, tea;x=?1, (rum "x");y=1.5`, `[{sugar []} {tea [{x true}]} {[{rum []} {x []}] [{y 1.5}]}]`},
		{`"peruser";q=100;w=60;pk=:cHsdsRa894==:`, ""},
		{`  "x";r=1  `, `[{x [{r 1}]}]`},
		{`"x";r=1;r=2`, `[{x [{r 2}]}]`},
	}
	for _, tc := range good {
		l, err := parseSFList(tc.in)
		if err != nil {
			t.Errorf("parseSFList(%q): %v", tc.in, err)
			continue
		}
		if got := fmt.Sprint(l); tc.want != "" && got != tc.want {
			t.Errorf("parseSFList(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	bad := []string{
		`"x";r=1,`,               // trailing comma
		`"x" "y"`,                // no comma
		`"x";R=1`,                // uppercase key
		`"x";r=1234567890123456`, // integer of 16 digits
		`"x;r=1`,                 // unterminated string
		`"x\y";r=1`,              // bad escape
		"\"x\u00e9\";r=1",        // non-ASCII
		`"x";r=:abc`,             // unterminated byte sequence
		`"x";r=?2`,               // bad boolean
		`"x";=1`,                 // empty key
		`"x";r=1.2345`,           // 4 fractional digits
		`"x";r=`,                 // no value
		`"x"; r =1`,              // space before '='
	}
	for _, in := range bad {
		if l, err := parseSFList(in); err == nil {
			t.Errorf("parseSFList(%q) = %v, want an error", in, l)
		}
	}
}
