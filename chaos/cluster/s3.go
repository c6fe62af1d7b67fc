package cluster

// s3.go owns the cluster's object store: one versitygw child serving
// Dir/s3/root with its posix backend, the bucket directory made before it
// starts, and the random credentials of this cluster. Its fields are fixed
// once started.
//
// Invariant: the gateway counts as ready only when it answers a HeadBucket
// signed with this cluster's credentials, so neither a process of someone
// else holding the port nor a missing bucket passes for ours.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	bucket       = "sluice"
	objectPrefix = "chaos"
	region       = "us-east-1"
)

// S3 describes the cluster's object store, for a runner that reads the
// bucket itself (tiered-read checks) or puts a proxy in front of it.
type S3 struct {
	Endpoint  string // http://127.0.0.1:PORT
	Bucket    string
	Prefix    string // key prefix of the brokers' objects
	Region    string
	AccessKey string
	SecretKey string
	Root      string // the posix backend's root; the bucket is Root/Bucket
	LogPath   string
}

// URL is the --object-store value the brokers are given.
func (s S3) URL() string {
	q := url.Values{"endpoint": {s.Endpoint}, "region": {s.Region}}
	return (&url.URL{Scheme: "s3", Host: s.Bucket, Path: "/" + s.Prefix, RawQuery: q.Encode()}).String()
}

// env is the AWS environment that gives a child these credentials.
func (s S3) env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// s3Server is the running gateway.
type s3Server struct {
	info S3
	proc *process
}

// startS3 starts the gateway on a free port and waits until it serves the
// bucket, trying fresh ports when the one picked was taken meanwhile.
func startS3(ctx context.Context, cfg Config, spawn *spawner) (*s3Server, error) {
	dir := filepath.Join(cfg.Dir, "s3")
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, bucket), 0o755); err != nil {
		return nil, fmt.Errorf("chaos/cluster: make the bucket directory: %w", err)
	}
	info := S3{
		Bucket:    bucket,
		Prefix:    objectPrefix,
		Region:    region,
		AccessKey: "chaos" + randomHex(8),
		SecretKey: randomHex(20),
		Root:      root,
		LogPath:   filepath.Join(dir, "versitygw.log"),
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		info.Endpoint = "http://" + ports[0]
		// A new process each attempt, so a failed attempt's exit is not
		// kept as the gateway's.
		proc := &process{
			name: "versitygw",
			path: cfg.VersityGW,
			args: []string{
				"--access", info.AccessKey, "--secret", info.SecretKey, "--region", info.Region,
				"--port", ports[0], "--quiet", "posix", root,
			},
			env:     os.Environ(),
			logPath: info.LogPath,
			spawn:   spawn,
		}
		s := &s3Server{info: info, proc: proc}
		err = s.start(ctx, cfg)
		if err == nil {
			return s, nil
		}
		_ = proc.kill() // errNotRunning when it exited by itself
		if attempt < startAttempts && proc.outputContains(addrInUse) {
			cfg.Logger.Warn().Str("endpoint", info.Endpoint).Int("attempt", attempt).Msg("the S3 port was taken; trying a fresh one")
			continue
		}
		return nil, fmt.Errorf("chaos/cluster: start versitygw (attempt %d): %w", attempt, proc.withLatestTail(err))
	}
}

// start runs the gateway and waits until a signed HeadBucket succeeds.
func (s *s3Server) start(ctx context.Context, cfg Config) error {
	if err := s.proc.start(); err != nil {
		return err
	}
	client := s3.New(s3.Options{
		Region:       s.info.Region,
		BaseEndpoint: aws.String(s.info.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.info.AccessKey, s.info.SecretKey, ""),
		Retryer:      aws.NopRetryer{},
	})
	r := s.proc.current()
	return poll(ctx, cfg.ReadyTimeout, r.exited, func(ctx context.Context) error {
		_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.info.Bucket)})
		if err != nil {
			return fmt.Errorf("HeadBucket %s on %s: %w", s.info.Bucket, s.info.Endpoint, err)
		}
		return nil
	})
}

// poll calls try every pollInterval, each call bounded by requestTimeout,
// until it returns nil, exited closes, ctx ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, exited <-chan struct{}, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, requestTimeout)
		err := try(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before it was ready (last: %w)", err)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("not ready within %v (last: %w)", timeout, err)
			}
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
