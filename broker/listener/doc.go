// Package listener owns what a broker's listeners are and how they speak TLS,
// apart from the broker that serves them: it imports nothing of this
// repository.
//
//   - listeners.go parses Kafka's settings: `listeners`
//     (NAME://host:port,...), `listener.security.protocol.map`
//     (NAME:PROTOCOL,...) and `advertised.listeners`, with the four security
//     protocols PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL. It is pure.
//   - tls.go is the TLS source: the server's certificate and key and the CA
//     that client certificates must chain to, reloaded from their files when
//     they change, so certificates rotate without a restart. It hands out a
//     server tls.Config for the Kafka and HTTP listeners and a client
//     tls.Config for dialling other brokers with the same certificate.
//   - principal.go names the user a verified client certificate stands for
//     (mutual TLS); the caller forms the principal User:<name>.
//
// Subpackage certgen makes a CA and certificates with Go's crypto, for
// `make cluster SECURE=1` and the tests.
//
// # Reloading
//
// The TLS source checks its files (modification time, size and identity, so
// a file renamed over the old one counts) at most once per second, on the
// handshake that finds a second gone since the last check. A changed file is
// read again; a reload that fails (a missing file, a certificate and key that
// do not match, say while a rotation has written one and not yet the other)
// keeps the last good certificate and CA pool and is retried at the next
// check, and its error goes to the OnReloadError callback (once per distinct
// error, not once per second). Connections already open keep the certificate
// they were made with; new ones get the newest.
package listener
