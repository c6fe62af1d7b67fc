//go:build !unix

package e2e

// flushWriteback does nothing where sync(2) is not offered.
func flushWriteback() {}
