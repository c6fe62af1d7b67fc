package s3_test

import (
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore"

	"github.com/sluice-mq/sluice/tier/objstore/s3"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url     string
		want    s3.Config
		wantErr bool
	}{
		{url: "s3://b", want: s3.Config{Bucket: "b"}},
		{url: "s3://b/", want: s3.Config{Bucket: "b"}},
		{url: "s3://b/p/q/", want: s3.Config{Bucket: "b", Prefix: "p/q/"}},
		{url: "s3://b/p?endpoint=http://127.0.0.1:9000&region=eu-west-1",
			want: s3.Config{Bucket: "b", Prefix: "p/", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1"}},
		{url: "s3://b?region=us-east-1", want: s3.Config{Bucket: "b", Region: "us-east-1"}},
		{url: "s3:///p", wantErr: true},                          // no bucket
		{url: "file:///tmp", wantErr: true},                      // wrong scheme
		{url: "s3://key:secret@b/p", wantErr: true},              // credentials in the url
		{url: "s3://b/p?endpont=http://h:1", wantErr: true},      // a typo
		{url: "s3://b/p?region=a&region=b", wantErr: true},       // twice
		{url: "s3://b/p?endpoint=127.0.0.1:9000", wantErr: true}, // no scheme
		{url: "s3://b/p?endpoint=ftp://h", wantErr: true},        // not http
		{url: "s3://b/a//b", wantErr: true},                      // empty segment
		{url: "s3://b/../x", wantErr: true},                      // dot-dot
		{url: "s3://b/%zz", wantErr: true},                       // bad escape
		{url: "s3://b/p?endpoint=http%3A%2F%2Fh%3A1", want: s3.Config{Bucket: "b", Prefix: "p/", Endpoint: "http://h:1"}},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			got, err := s3.ParseURL(tc.url)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseURL = %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseURL = %+v, %v; want %+v", got, err, tc.want)
			}
			if again, err := s3.ParseURL(got.URL()); err != nil || again != got {
				t.Fatalf("ParseURL(%q) = %+v, %v; want %+v back", got.URL(), again, err, got)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := s3.New(t.Context(), s3.Config{}, objstore.Options{}); err == nil {
		t.Fatal("New without a bucket succeeded")
	}
	if _, err := s3.New(t.Context(), s3.Config{Bucket: "b"}, objstore.Options{AccessKey: "only"}); err == nil {
		t.Fatal("New with an access key and no secret succeeded")
	}
}
