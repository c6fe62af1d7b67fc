package s3test_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

func TestBinaryFromEnvironment(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "versitygw")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(s3test.EnvBinary, notExec)
	if _, err := s3test.Binary(); err == nil || !strings.Contains(err.Error(), s3test.EnvBinary) {
		t.Fatalf("Binary with a non-executable $%s = %v, want an error naming it", s3test.EnvBinary, err)
	}
	t.Setenv(s3test.EnvBinary, "")
	t.Setenv("PATH", "")
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir()) // no module root, so no bin/
	if p, err := s3test.Binary(); err == nil {
		t.Logf("found %s through GOPATH; the missing-binary message is not checked", p)
	} else if !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Binary with nothing installed = %v, want a message that says to run make tools", err)
	}
}

func TestStartStop(t *testing.T) {
	srv := s3test.Start(t)
	u, err := url.Parse(srv.URL("a/b"))
	if err != nil || u.Scheme != "s3" || u.Host != srv.Bucket || u.Path != "/a/b" || u.Query().Get("endpoint") != srv.Endpoint {
		t.Fatalf("URL = %v, %v", u, err)
	}
	if env := strings.Join(srv.Env(), " "); !strings.Contains(env, "AWS_ACCESS_KEY_ID="+srv.AccessKey) {
		t.Fatalf("Env = %s, want the access key", env)
	}
	if fi, err := os.Stat(filepath.Join(srv.Dir, srv.Bucket)); err != nil || !fi.IsDir() {
		t.Fatalf("bucket directory: %v", err)
	}
	host := strings.TrimPrefix(srv.Endpoint, "http://")
	srv.Stop()
	srv.Stop() // idempotent
	var d net.Dialer
	if c, err := d.DialContext(context.Background(), "tcp", host); err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts connections after Stop", host)
	}
}
