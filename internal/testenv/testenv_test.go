package testenv

import (
	"testing"
)

// recorder is a testing.TB that records how Require stopped it.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = format }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = format }

func TestRequire(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Require(r, "no /dev/fuse")
		if got := r.fatal != ""; got != (ci == "true") {
			t.Errorf("CI=%q: failed=%v skipped=%v", ci, r.fatal != "", r.skip != "")
		}
		if got := r.skip != ""; got != (ci != "true") {
			t.Errorf("CI=%q: failed=%v skipped=%v", ci, r.fatal != "", r.skip != "")
		}
		r = &recorder{TB: t}
		Require(r, "")
		if r.fatal != "" || r.skip != "" {
			t.Errorf("CI=%q: nothing missing, but Require stopped the test", ci)
		}
	}
}
