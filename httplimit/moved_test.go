package httplimit

// isAlnum is the test parser's (sf_test.go); the field parsers that had it
// moved to internal/clientip.
func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
