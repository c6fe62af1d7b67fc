//go:build !linux

package cluster

// proc_other.go: elsewhere there is no parent-death signal; a child outlives
// a killed parent, and only Stop ends it.

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
