// Package e2e holds Sluice's end-to-end tests: they build cmd/sluiced once,
// start it as a real process on 127.0.0.1 with free ports and a fresh data
// directory, and talk to it with real clients only: franz-go (kgo, kadm),
// raw kmsg frames over TCP, kcat and confluent-kafka-python. Nothing here
// imports broker internals; the tests check the contract of the README's guarantees,
// the command-line interface and the exact error codes real Kafka clients expect.
//
// Running:
//
//	go test ./e2e/...                         # builds ./cmd/sluiced into a temp dir
//	go test -run TestConformance -v ./e2e/... # one test, with broker log tails on failure
//
// Environment:
//
//   - SLUICE_E2E_SLUICED=/path/to/binary uses a prebuilt binary instead of
//     building ./cmd/sluiced (handy when iterating on the tests alone).
//   - SLUICE_E2E_LOG_LEVEL=debug|info|warn sets the brokers' --log-level
//     (default info).
//   - CI=true makes missing external clients (kcat, /usr/bin/python3 with
//     confluent_kafka) a failure instead of a skip.
//
// Every test owns its brokers: they are stopped with SIGTERM (and must exit
// 0) or killed in t.Cleanup, and a failed test prints the tail of each
// broker's log. Waiting is always polling until a deadline, never sleeping,
// and no assertion depends on how fast anything runs.
package e2e
