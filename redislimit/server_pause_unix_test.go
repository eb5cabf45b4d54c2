//go:build unix

package redislimit_test

import (
	"syscall"
	"testing"
)

// pause stops the server's process (SIGSTOP) without closing anything: the
// kernel still accepts connections and buffers what is sent, and nothing
// is read or answered, as with a server stalled by a long fork or swap.
func (s *server) pause(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// resume continues a paused server (SIGCONT).
func (s *server) resume(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}
