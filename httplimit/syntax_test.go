package httplimit

import "testing"

func TestToken(t *testing.T) {
	for s, want := range map[string]bool{
		"Bearer": true, "for": true, "x-api_key.1~": true, "!#$%&'*+-.^_`|~": true,
		"": false, "a b": false, "a=b": false, `"q"`: false, "a,b": false, "é": false, "[": false,
	} {
		if isToken(s) != want {
			t.Errorf("isToken(%q) = %v, want %v", s, !want, want)
		}
	}
	if got := trimOWS(" \t k \t"); got != "k" {
		t.Errorf("trimOWS: %q", got)
	}
}

func TestCredentials(t *testing.T) {
	for _, tc := range []struct {
		v, cred string
		ok      bool
	}{
		{"Bearer tok", "tok", true},
		{"bearer   tok ", "tok", true},
		{"Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", true},
		{"Bearer ", "", true}, // a scheme and a space: the credentials are empty
		{"Bearer", "", false},
		{"tok", "", false},
		{"Be@rer tok", "", false}, // not a scheme
		{"", "", false},
	} {
		if cred, ok := Credentials(tc.v); cred != tc.cred || ok != tc.ok {
			t.Errorf("Credentials(%q) = %q, %v; want %q, %v", tc.v, cred, ok, tc.cred, tc.ok)
		}
	}
}

func TestAPIKeySyntax(t *testing.T) {
	for _, tc := range []struct {
		values []string
		auth   bool
		key    string
		bare   bool
	}{
		{nil, false, "", false},
		{nil, true, "", false},
		{[]string{" k1 ", "k2"}, false, "k1", false}, // the first value
		{[]string{"Bearer tok"}, false, "Bearer tok", false},
		{[]string{" Bearer tok "}, true, "tok", false},
		{[]string{"Bearer"}, true, "Bearer", true},
		{[]string{"tok"}, true, "tok", true},
		{[]string{"  "}, true, "", true},
	} {
		if key, bare := apiKey(tc.values, tc.auth); key != tc.key || bare != tc.bare {
			t.Errorf("apiKey(%q, %v) = %q, %v; want %q, %v", tc.values, tc.auth, key, bare, tc.key, tc.bare)
		}
	}
}
