// Package httpsyntax reads the pieces of HTTP field-value syntax (RFC 9110,
// 5.6) that the doors and package clientip share: tokens, optional
// whitespace, and the key an API-key field (Authorization's credentials)
// carries. gRPC metadata carries the same values, so both doors read them
// alike.
package httpsyntax

import "strings"

// IsToken reports whether s is an RFC 9110 token (5.6.2).
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// TrimOWS trims optional whitespace (5.6.3: spaces and tabs) from both ends
// of s.
func TrimOWS(s string) string { return strings.Trim(s, " \t") }

// Credentials returns the credentials of an Authorization value v (11.4:
// an auth-scheme, a space, and the credentials): "Bearer tok" is "tok",
// trimmed. ok is false when v is not a scheme followed by a space ("tok",
// or the scheme alone, "Bearer").
func Credentials(v string) (cred string, ok bool) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !IsToken(scheme) {
		return "", false
	}
	return TrimOWS(cred), true
}

// APIKey returns the key that a field carrying an API key holds: its first
// value (header line, metadata value), trimmed, or "" if it has none. For
// Authorization (auth) the key is the credentials after the scheme
// ("Bearer tok": "tok"); bare reports a value without credentials to take
// ("Bearer" alone, or a key sent without a scheme), returned as it is for
// the door to judge.
func APIKey(values []string, auth bool) (key string, bare bool) {
	if len(values) == 0 {
		return "", false
	}
	key = TrimOWS(values[0])
	if !auth {
		return key, false
	}
	if cred, ok := Credentials(key); ok {
		return cred, false
	}
	return key, true
}
