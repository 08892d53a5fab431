package skips

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// goCommandStdout opens, for appending, the standard output of the parent
// process when that is the go command (go test runs the test binary with
// its output in a pipe of its own, and writes its "ok" lines to this one).
// A regular file is left alone: the go command writes it at an offset of
// its own, over what is appended here.
func goCommandStdout() (*os.File, error) {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(comm)) != "go" {
		return nil, errors.New("the parent process is not the go command")
	}
	path := fmt.Sprintf("/proc/%d/fd/1", ppid)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().IsRegular() {
		return nil, errors.New("the go command writes to a regular file")
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
}
