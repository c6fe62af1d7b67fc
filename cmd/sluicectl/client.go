package main

// client.go owns the conversation with the server: the URL, credentials
// (HTTP Basic from --user and --password-file, or a Bearer API key), TLS
// verification with --cacert, and turning the API's error bodies into
// errors that print the server's message.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// requestTimeout bounds one call to the server.
const requestTimeout = 30 * time.Second

// maxAnswer bounds the body read from the server.
const maxAnswer = 16 << 20

// env is what a command runs with.
type env struct {
	streams
	json     bool
	authUser string // the --user authenticating, if any
	base     *url.URL
	http     *http.Client
	header   http.Header // Authorization, if any
}

// newEnv checks the global flags and makes the HTTP client.
func newEnv(g globals, s streams) (*env, error) {
	base, err := url.Parse(g.server)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, usagef("--server %q is not an http:// or https:// URL", g.server)
	}
	e := &env{streams: s, json: g.json, authUser: g.user, base: base, header: http.Header{}}
	switch {
	case g.user != "" && g.apiKey != "":
		return nil, usagef("--user and --api-key both given (or SLUICE_API_KEY set); use one")
	case g.user != "" && g.passwordFile == "":
		return nil, usagef("--user needs --password-file (a password is never taken on the command line)")
	case g.user == "" && g.passwordFile != "":
		return nil, usagef("--password-file needs --user")
	case g.user != "":
		pw, err := readPasswordFile(g.passwordFile)
		if err != nil {
			return nil, err
		}
		req := &http.Request{Header: http.Header{}}
		req.SetBasicAuth(g.user, pw)
		e.header.Set("Authorization", req.Header.Get("Authorization"))
	case g.apiKey != "":
		e.header.Set("Authorization", "Bearer "+g.apiKey)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if g.cacert != "" {
		pem, err := os.ReadFile(g.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", g.cacert)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	e.http = &http.Client{Transport: transport, Timeout: requestTimeout}
	return e, nil
}

// readPasswordFile reads the first line of f, without its line ending.
func readPasswordFile(f string) (string, error) {
	raw, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	pw, _, _ := strings.Cut(string(raw), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("--password-file %s: the first line is empty", f)
	}
	return pw, nil
}

// serverError is the server's refusal or failure: {"error":{"code","message"}}.
type serverError struct {
	Status  int
	Code    string
	Message string
}

func (e *serverError) Error() string {
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// call sends body as JSON (none if nil) to path and decodes a 2xx answer
// into out (if not nil).
func (e *env) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	// path holds names escaped by the caller (url.PathEscape): a user
	// name may hold '/' or '%'.
	target := strings.TrimSuffix(e.base.String(), "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range e.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }() // the body was read; a close error changes nothing
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return answerError(resp.StatusCode, raw)
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the server's answer is not what sluicectl expects: %w", method, path, err)
	}
	return nil
}

// answerError reads an error body, or describes a body that is not one
// (a proxy's page, a server without this API).
func answerError(status int, raw []byte) error {
	var eb struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &eb); err == nil && eb.Error != nil && eb.Error.Message != "" {
		return &serverError{Status: status, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return &serverError{Status: status, Code: "http_" + fmt.Sprint(status), Message: text}
}
