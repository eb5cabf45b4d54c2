// Command inline instantiates the door calls TestReportInlines checks.
package main

import "github.com/atomiclimit/atomiclimit/internal/door"

func main() {
	var s door.Stack[string]
	s.Report(nil, door.Pass, nil, 1)
}
