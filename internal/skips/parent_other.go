//go:build !linux

package skips

import (
	"errors"
	"os"
)

// goCommandStdout is only implemented on Linux.
func goCommandStdout() (*os.File, error) {
	return nil, errors.New("the go command's output is found on Linux only")
}
