package httplimit

import "strings"

// This file reads the pieces of HTTP field-value syntax (RFC 9110, 5.6)
// that the key functions and the forwarding fields share: tokens, optional
// whitespace, and the credentials of an Authorization value. gRPC metadata
// carries the same values, so grpclimit reads them with these too.

// isToken reports whether s is an RFC 9110 token (5.6.2).
func isToken(s string) bool {
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

// trimOWS trims optional whitespace (5.6.3: spaces and tabs) from both ends
// of s.
func trimOWS(s string) string { return strings.Trim(s, " \t") }

// Credentials returns the credentials of an Authorization field value v
// (RFC 9110, 11.4: an auth-scheme, a space, and the credentials), without
// surrounding whitespace: "Bearer tok" is "tok". ok is false when v is not
// a scheme followed by a space ("tok", or the scheme alone, "Bearer").
// APIKey strips the scheme with it, and so does grpclimit's APIKey for
// "authorization" metadata.
func Credentials(v string) (cred string, ok bool) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !isToken(scheme) {
		return "", false
	}
	return trimOWS(cred), true
}

// apiKey returns the key that a field carrying an API key holds: its first
// value (header line), trimmed, or "" if it has none. For Authorization
// (auth) the key is the credentials after the scheme ("Bearer tok":
// "tok"); bare reports a value without credentials to take ("Bearer"
// alone, or a key sent without a scheme), returned as it is for the key
// function to judge.
func apiKey(values []string, auth bool) (key string, bare bool) {
	if len(values) == 0 {
		return "", false
	}
	key = trimOWS(values[0])
	if !auth {
		return key, false
	}
	if cred, ok := Credentials(key); ok {
		return cred, false
	}
	return key, true
}
