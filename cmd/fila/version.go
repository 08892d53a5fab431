package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// develVersion is the version of a binary built from a checkout, as the Go
// toolchain names it.
const develVersion = "(devel)"

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fila's version, the module it was built from and the Go version",
		Long: `Print the version of the fila module the command was built from (as
go install github.com/fila-go/fila/cmd/fila@VERSION records it; "(devel)"
when it was built from a checkout the toolchain could not stamp), the Go
version and platform, and the commit when the build recorded one. fila
--version prints the first line only.`,
		Example: "  fila version",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(a.stdout, versionText(a.buildInfo))
			return err
		},
	}
}

// buildVersion returns the module path and version recorded in the binary.
func buildVersion(read func() (*debug.BuildInfo, bool)) (bi *debug.BuildInfo, path, version string) {
	path, version = "github.com/fila-go/fila", develVersion
	if read == nil {
		read = debug.ReadBuildInfo
	}
	bi, ok := read()
	if !ok || bi == nil {
		return nil, path, version
	}
	if bi.Main.Path != "" {
		path = bi.Main.Path
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	return bi, path, version
}

// versionLine is the first line of fila version: "fila VERSION".
func versionLine(read func() (*debug.BuildInfo, bool)) string {
	_, _, v := buildVersion(read)
	return "fila " + v
}

// versionText is what fila version prints.
func versionText(read func() (*debug.BuildInfo, bool)) string {
	bi, path, v := buildVersion(read)
	var b strings.Builder
	fmt.Fprintf(&b, "fila %s\n", v)
	fmt.Fprintf(&b, "module: %s\n", path)
	goVersion := runtime.Version()
	if bi != nil && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(&b, "go:     %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	if bi != nil {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			if modified == "true" {
				rev += " (with uncommitted changes)"
			}
			fmt.Fprintf(&b, "commit: %s\n", rev)
		}
	}
	return b.String()
}
