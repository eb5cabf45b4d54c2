//go:build unix

package latency

import "syscall"

// pageFaults returns the page faults the process has taken so far (minor and
// major): each first touch of a page of memory the process had not used, or
// had given back to the operating system, is one.
func pageFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt) + int64(ru.Majflt)
}
