package httplimit

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	date := []string{now.Add(-time.Hour).Format(http.TimeFormat)} // the provider's clock, an hour behind ours
	for _, c := range []struct {
		v    string
		date []string
		want time.Duration
		ok   bool
	}{
		{"120", nil, 2 * time.Minute, true},
		{" 0 ", nil, 0, true},
		{"007", nil, 7 * time.Second, true},
		{"99999999999999999999999", nil, maxHold, true}, // a year at most, no overflow
		{now.Add(30 * time.Second).Format(http.TimeFormat), nil, 30 * time.Second, true},
		// A date is measured from the response's Date: the clocks' skew
		// does not count.
		{now.Add(-time.Hour + 30*time.Second).Format(http.TimeFormat), date, 30 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), nil, 0, true}, // past: no wait
		{"Sunday, 06-Nov-94 08:49:37 GMT", nil, 0, true},              // RFC 850, past
		{now.Add(2 * 365 * 24 * time.Hour).Format(http.TimeFormat), nil, maxHold, true},
		{"", nil, 0, false},
		{"-1", nil, 0, false},
		{"1.5", nil, 0, false},
		{"soon", nil, 0, false},
	} {
		got, ok := parseRetryAfter(c.v, c.date, now)
		if got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q, %q) = %v, %v; want %v, %v", c.v, c.date, got, ok, c.want, c.ok)
		}
	}
}

func TestQuotaSpent(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  time.Duration
		ok    bool
	}{
		{[]string{`"default";r=0;t=30`}, 30 * time.Second, true},
		{[]string{`"default";r=5;t=30`}, 0, false},
		{[]string{`"default";r=0`}, 0, false}, // spent, but no reset: nothing to wait for
		{[]string{`"minute";r=3, "day";r=0;t=3600`}, time.Hour, true},
		{[]string{`"minute";r=0;t=20`, `"day";r=0;t=3600`}, time.Hour, true}, // two lines
		{[]string{`"a";r=0;t=5;pk=:cHsdsRa894Q==:`}, 0, false},               // bad base64: the line is not a list
		{[]string{`"a";r=0;t=5;pk=:cHsdsRa894==:`}, 5 * time.Second, true},
		{[]string{`limit;t=9;r=0`}, 9 * time.Second, true}, // a token, parameters in any order
		{[]string{`"a";r=0;t=5;r=1`}, 0, false},            // a repeated key overrides
		{[]string{`"a";r=0;t=5,`}, 0, false},               // a trailing comma
		{[]string{`"a";r=0;t=5 "b"`}, 0, false},            // no comma
		{[]string{`"a";r=0;t=1.5`}, 0, false},              // t not an Integer
		{[]string{`"a";r=0;t=-1`}, 0, false},
		{[]string{`"a";r=0;t="5"`}, 0, false},
		{[]string{`("a" "b");r=0;t=4`}, 4 * time.Second, true}, // an inner list
		{[]string{`"a";r=0;t=99999999999999`}, maxHold, true},
		{[]string{`"a";r=-0;t=2`}, 2 * time.Second, true}, // -0 is 0
		{[]string{`"a";r=00;t=2`}, 2 * time.Second, true},
		{[]string{``}, 0, false},
		{nil, 0, false},
	} {
		got, ok := quotaSpent(c.lines)
		if got != c.want || ok != c.ok {
			t.Errorf("quotaSpent(%q) = %v, %v; want %v, %v", c.lines, got, ok, c.want, c.ok)
		}
	}
}

// refSpent is quotaSpent of one line by the test's own RFC 9651 parser.
func refSpent(line string) (time.Duration, bool, error) {
	items, err := parseSFList(line)
	if err != nil {
		return 0, false, err
	}
	var reset time.Duration
	ok := false
	for _, it := range items {
		r, _ := it.param("r")
		tv, _ := it.param("t")
		if r, isInt := r.(int64); isInt && r == 0 {
			if s, isInt := tv.(int64); isInt && s >= 0 {
				reset, ok = max(reset, min(time.Duration(s)*time.Second, maxHold)), true
			}
		}
	}
	return reset, ok, nil
}

// The scanner agrees with the test's RFC 9651 parser, written apart from
// it, on what a RateLimit line says. (The test parser does not know
// RFC 9651's Dates and Display Strings: lines with them are left out.)
func FuzzQuotaSpent(f *testing.F) {
	for _, s := range []string{
		`"default";r=0;t=30`, `"minute";r=3, "day";r=0;t=3600`, `limit;t=9;r=0`,
		`"a";r=0;t=5;pk=:cHsdsRa894==:`, `("a" "b");r=0;t=4`, `"a";r=0;t=5;r=1`,
		`"a";r=0;t=1.5`, `"x";r=?1;t=2`, `"a\"b";r=0;t=3`, `  "x";r=0;t=1  `, `a, b;r=0;t=2, c`,
		`"a";r=-0;t=2`, `"a";r=-00;t=2`, `"a";r=07;t=2`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "@%") {
			return
		}
		want, wantOK, err := refSpent(line)
		got, ok := spentIn(line)
		if err != nil {
			want, wantOK = 0, false
		}
		if got != want || ok != wantOK {
			t.Errorf("spentIn(%q) = %v, %v; the reference (err %v) says %v, %v", line, got, ok, err, want, wantOK)
		}
	})
}

// Reading a response's fields allocates nothing.
func TestListenAllocs(t *testing.T) {
	lines := []string{`"minute";r=0;t=20;pk=:cHsdsRa894==:, "day";r=9;t=3600`}
	date := []string{"Fri, 27 Nov 2026 10:00:00 GMT"}
	now := time.Now()
	allocs := testing.AllocsPerRun(100, func() {
		quotaSpent(lines)
		parseRetryAfter("Fri, 27 Nov 2026 10:00:30 GMT", date, now)
		parseRetryAfter("30", nil, now)
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

// A RateLimit reset too large for a Duration must be capped at maxHold, as
// Retry-After is, not wrap around (t·1e9 overflows int64 past ~9.2e9 s).
func TestQuotaSpentResetBeyondADuration(t *testing.T) {
	for _, line := range []string{
		`"default";r=0;t=10000000000`, // 1e10 s: wraps negative
		`"default";r=0;t=18446744074`, // wraps to a small positive
		`"default";r=0;t=999999999999999`,
	} {
		d, ok := quotaSpent([]string{line})
		if !ok || d != maxHold {
			t.Errorf("quotaSpent(%s) = %v, %v; want %v, true", line, d, ok, maxHold)
		}
	}
}
