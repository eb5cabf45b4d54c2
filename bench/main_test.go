package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestUpdateTakesTheDefaults: -update rewrites the run later runs compare
// with, so it refuses a short or small run; a run to bench/out/ may be
// anything.
func TestUpdateTakesTheDefaults(t *testing.T) {
	for _, tc := range []struct {
		args    string
		wantErr string // "" for none
	}{
		{"-update", ""},
		{"-update -count=6 -benchtime=200ms", ""}, // the defaults, spelled out
		{"-update -cpu=1,2", ""},
		{"-update -count=1", "drop -count=1"},
		{"-update -keys=1000", "drop -keys=1000"},
		{"-update -benchtime=10ms", "drop -benchtime=10ms"},
		{"-update -latency-calls=1000", "drop -latency-calls=1000"},
		{"-update -count=3 -keys=10", "drop -count=3 -keys=10"},
		{"-update -quick", "not a -quick one"},
		{"-update -out=/tmp/x", "drop -out"},
		{"-count=1 -keys=1000 -benchtime=10ms -latency-calls=1000", ""},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o options
		o.register(fs)
		if err := fs.Parse(strings.Fields(tc.args)); err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		err := o.check(fs)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one with %q", tc.args, err, tc.wantErr)
		}
	}
}
