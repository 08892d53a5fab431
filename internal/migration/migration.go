// Package migration reads the versioned schema migrations a SQL driver
// embeds: files named NNNN_description.sql, applied in version order.
package migration

import (
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one embedded, versioned schema change.
type Migration struct {
	Version int
	// Name is the file name without ".sql", as recorded once applied.
	Name string
	// SQL is the file's text, with the driver's placeholders unreplaced.
	SQL string
}

// Load returns the migrations in dir of fsys, in version order. It panics
// on a file name without a version or an unreadable file: both are errors
// of the build, not of the caller.
func Load(fsys fs.FS, dir string) []Migration {
	files, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, f := range files {
		base := path.Base(f)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("migration: bad migration file name " + f)
		}
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(base, ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}
