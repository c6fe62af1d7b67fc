package s3test

// proc_linux.go: the gateway dies with the test binary even if it is killed
// before its cleanups run.

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
