package migration

import (
	"testing"
	"testing/fstest"
)

// TestLoad: migrations come back in version order, not name order, with
// their names and texts; a file without a version is a build error.
func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0010_ten.sql": {Data: []byte("ten")},
		"m/0002_two.sql": {Data: []byte("two")},
		"m/README":       {Data: []byte("not a migration")},
	}
	got := Load(fsys, "m")
	if len(got) != 2 || got[0] != (Migration{2, "0002_two", "two"}) || got[1] != (Migration{10, "0010_ten", "ten"}) {
		t.Fatalf("Load = %+v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Load of a file without a version did not panic")
		}
	}()
	Load(fstest.MapFS{"m/init.sql": {}}, "m")
}
