//go:build race

package faults

// raceBuild: the tests run under the race detector, and so does payreq.
const raceBuild = true
