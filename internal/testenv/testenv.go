// Package testenv decides what a test does when the machine lacks
// something it needs (root, network namespaces, FUSE, docker).
//
// A person running `go test ./...` on a laptop gets a loud skip naming what
// is missing. Under CI (CI=true, where .ci/run installs everything the tests
// need) the same condition fails the test: nothing is silently left out.
package testenv

import (
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (the CI environment variable
// is "true", as .ci/run and most CI systems set it).
func InCI() bool { return os.Getenv("CI") == "true" }

// Require stops t when why is not empty: a skip outside CI, a failure in
// it. why says what is missing and how to get it.
func Require(t testing.TB, why string) {
	t.Helper()
	if why == "" {
		return
	}
	if InCI() {
		t.Fatalf("CI=true but this test cannot run: %s", why)
		return
	}
	t.Skipf("SKIPPED (needs what this machine lacks; fails under CI=true): %s", why)
}
