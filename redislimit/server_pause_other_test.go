//go:build !unix

package redislimit_test

import "testing"

// pause needs SIGSTOP, which only unix systems have.
func (s *server) pause(t testing.TB) { t.Skip("pausing redis-server needs SIGSTOP (unix)") }

func (s *server) resume(testing.TB) {}
