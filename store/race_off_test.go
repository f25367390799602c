//go:build !race

package store

// raceBuild is true under the race detector.
const raceBuild = false
