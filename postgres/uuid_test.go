package postgres

import (
	"testing"

	"github.com/fila-go/fila/internal/uuidtext"
)

// TestPgUUID: the binary form is the bytes of the text, in either case.
func TestPgUUID(t *testing.T) {
	for _, s := range []string{"0190d5a4-1b2c-7d3e-8f40-a1b2c3d4e5f6", "0190D5A4-1B2C-7D3E-8F40-A1B2C3D4E5F6",
		"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"} {
		want, ok := uuidtext.Parse(s)
		if !ok {
			t.Fatalf("uuidtext.Parse(%s) refused it", s)
		}
		got := pgUUID(s)
		if !got.Valid || got.Bytes != want {
			t.Errorf("pgUUID(%s) = %x (valid %v), want %x", s, got.Bytes, got.Valid, want)
		}
	}
}
