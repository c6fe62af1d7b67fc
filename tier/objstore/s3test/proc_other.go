//go:build !linux

package s3test

// proc_other.go: elsewhere the gateway outlives a killed test binary; its
// cleanups stop it otherwise.

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
