//go:build linux

package cluster

// proc_linux.go: a child gets SIGKILL when the thread that forked it (the
// spawner's, which lives as long as the Cluster) or the whole parent dies.

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
