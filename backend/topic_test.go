package backend

import (
	"strings"
	"testing"

	"github.com/fila-go/fila/internal/uuidtext"
)

func TestCopyID(t *testing.T) {
	const id = "01a232f8-afc3-7000-a074-cfa9121200bb"
	a, b := CopyID(id, "orders.email"), CopyID(id, "orders.audit")
	if a == b {
		t.Fatalf("copies in two queues share the id %s", a)
	}
	if a != CopyID(id, "orders.email") {
		t.Fatal("CopyID is not deterministic")
	}
	if CopyID("01a232f8-afc3-7000-a074-cfa9121200bc", "orders.email") == a {
		t.Fatal("copies of two messages in one queue share an id")
	}
	for _, c := range []string{a, b} {
		if len(c) != 36 || !strings.HasPrefix(c, "01a232f8-afc3-7") || !strings.ContainsAny(c[19:20], "89ab") {
			t.Errorf("copy id %s: want a version 7 UUID starting with the original's time", c)
		}
		if _, ok := uuidtext.Parse(c); !ok {
			t.Errorf("copy id %s does not parse as a UUID", c)
		}
	}
	if c := CopyID("not-a-uuid", "q"); len(c) != 36 || c[14] != '7' {
		t.Errorf("copy of a non-UUID id: %s, want a version 7 UUID", c)
	}
}
