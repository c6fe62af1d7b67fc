// Package s3test starts a real S3 service for tests: Versity's gateway
// (versitygw v1.8.0, posix backend) as a child process on a free 127.0.0.1
// port, serving a fresh directory with one bucket, under random credentials.
//
//	srv := s3test.Start(t)                    // stopped by t.Cleanup
//	store, err := open.URL(ctx, srv.URL("prefix"), srv.Options())
//	cmd.Env = append(os.Environ(), srv.Env()...) // for a sluiced subprocess
//
// The binary is found through $SLUICE_VERSITYGW, then <module root>/bin
// (where `make tools` installs it), then $PATH, then $(go env GOPATH)/bin. If
// it is missing the test fails with a message that says to run `make tools`.
package s3test
