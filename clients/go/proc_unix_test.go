//go:build unix

package convo_test

import (
	"syscall"
	"testing"
)

// assertGone checks that no process, not even a zombie, has the pid: the child was
// waited for.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("process %d is still there after Close (kill 0: %v)", pid, err)
	}
}
