package s3test

// s3test.go owns one versitygw child process per Start: finding the binary,
// starting it on a free port, waiting until it answers, creating the bucket,
// and killing it (then waiting for it) when the test ends.
//
// Invariant: a Server's process is killed and reaped by Stop, which
// t.Cleanup calls; Stop is idempotent.
// Invariant: readiness is decided by a signed request with this server's own
// random credentials, so a process of another test that happens to hold the
// port is never taken for ours.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// EnvBinary names the environment variable that overrides where the
// versitygw binary is.
const EnvBinary = "SLUICE_VERSITYGW"

const (
	region       = "us-east-1"
	bucket       = "sluice-test"
	startTries   = 3                // a port taken between picking and binding costs a try
	readyTimeout = 60 * time.Second // a cold start of a large binary on a slow CI box
	pollEvery    = 20 * time.Millisecond
)

// Server is a running versitygw with one empty bucket.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // the posix backend's root; the bucket is Dir/Bucket

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been reaped
	logPath string
	stop    sync.Once
}

// Start starts versitygw for the test and stops it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	dir := t.TempDir()
	var lastErr error
	for try := 1; try <= startTries; try++ {
		s, err := start(t, bin, dir, try)
		if err == nil {
			return s
		}
		lastErr = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	t.Fatalf("s3test: %v", lastErr)
	return nil
}

var errExited = errors.New("versitygw exited")

// start makes one attempt on a fresh port.
func start(t testing.TB, bin, dir string, try int) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, fmt.Sprintf("root%d", try))
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  fmt.Sprintf("http://127.0.0.1:%d", port),
		Bucket:    bucket,
		AccessKey: "sluice" + randomHex(8),
		SecretKey: randomHex(20),
		Region:    region,
		Dir:       root,
		exited:    make(chan struct{}),
		logPath:   filepath.Join(dir, fmt.Sprintf("versitygw%d.log", try)),
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	s.cmd = exec.Command(bin,
		"--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region,
		"--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet",
		"posix", root)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.Stop)
	if err := s.waitReady(t); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w\n--- versitygw log (%s) ---\n%s", err, s.logPath, s.logTail())
	}
	return s, nil
}

// waitReady polls until the server answers a signed request, then creates
// the bucket.
func (s *Server) waitReady(t testing.TB) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	client := s.client()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var lastErr error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		_, err := client.ListBuckets(attempt, &s3.ListBucketsInput{})
		cancelAttempt()
		if err == nil {
			break
		}
		lastErr = err
		select {
		case <-s.exited:
			return fmt.Errorf("%w on %s before answering: %v", errExited, s.Endpoint, s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("versitygw on %s did not answer within %v: %w", s.Endpoint, readyTimeout, lastErr)
		case <-tick.C:
		}
	}
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", s.Bucket, err)
	}
	t.Logf("s3test: versitygw serving %s, bucket %s, in %s", s.Endpoint, s.Bucket, s.Dir)
	return nil
}

// client is an SDK client of this server that never retries (the caller
// polls) and uses its credentials only.
func (s *Server) client() *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		Retryer:      aws.NopRetryer{},
	})
}

// Stop kills the process and waits for it. Calls after the first do nothing.
func (s *Server) Stop() {
	s.stop.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// URL returns the s3:// URL of the bucket with a key prefix ("" for none),
// for open.URL or sluiced's --object-store.
func (s *Server) URL(prefix string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "region": {s.Region}}
	return (&url.URL{Scheme: "s3", Host: s.Bucket, Path: "/" + prefix, RawQuery: q.Encode()}).String()
}

// Options returns objstore options carrying this server's credentials and a
// timeout short enough for tests.
func (s *Server) Options() objstore.Options {
	return objstore.Options{AccessKey: s.AccessKey, SecretKey: s.SecretKey, Timeout: 20 * time.Second}
}

// Env returns the AWS environment variables that give a subprocess (or the
// standard credential chain) this server's credentials and region.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// logTail returns the end of the process's output.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.TrimSpace(b))
}

// Binary returns the path of the versitygw binary, or an error that says how
// to install it.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("$%s=%s is not an executable file", EnvBinary, p)
	}
	var looked []string
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, "bin", "versitygw")
		if isExecutable(p) {
			return p, nil
		}
		looked = append(looked, p)
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	looked = append(looked, "$PATH")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, gopath := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(gopath, "bin", "versitygw")
			if isExecutable(p) {
				return p, nil
			}
			looked = append(looked, p)
		}
	}
	return "", fmt.Errorf("versitygw (the S3 server of the tiering tests) not found in $%s, %s; "+
		"run `make tools` to install v1.8.0 into bin/", EnvBinary, strings.Join(looked, ", "))
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// moduleRoot returns the nearest directory at or above the working
// directory that holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	return freeport.Port()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
