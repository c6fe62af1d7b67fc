// Package certgen makes the certificates a secure cluster needs, with Go's
// own crypto (no openssl): a certificate authority, and leaf certificates it
// signs for brokers (server and client use, for mutual TLS between brokers)
// and for clients. `make cluster SECURE=1` and the tests use it; production
// deployments bring certificates from their own PKI.
//
// Every key is ECDSA on P-256, every signature ECDSA with SHA-256: supported
// by Go, OpenSSL (kcat, librdkafka) and Java alike.
//
// # Files
//
// A CA lives in a directory as two PEM files, ca.crt (0644) and ca.key
// (0600, PKCS #8 "PRIVATE KEY"); LoadCA reads them back so a later run can
// issue more certificates from the same authority. A leaf is written by
// WriteFiles as <name>.crt and <name>.key with the same modes. Files are
// written to a temporary name and renamed into place, so a broker reloading
// its certificate never reads half a file.
package certgen
