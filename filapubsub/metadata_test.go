package filapubsub

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeKey(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"plain", "plain"},
		{"Content-Type", "Content-Type"},
		{"ü☺ spaces/slashes\\", "ü☺ spaces/slashes\\"},
		{"", "__0x__"},
		{"__0x__", "__0x5f___0x__"},
		{"__0x41__", "__0x5f___0x41__"},
		{"a\x00b", "a__0x0__b"},
		{"\x1f\x7f", "__0x1f____0x7f__"},
		{"_\x01", "___0x1__"},
		{"___0x", "___0x5f___0x"},
	} {
		if got := escapeKey(c.in); got != c.out {
			t.Errorf("escapeKey(%q) = %q, want %q", c.in, got, c.out)
		}
		if got := unescapeKey(c.out); got != c.in {
			t.Errorf("unescapeKey(%q) = %q, want %q", c.out, got, c.in)
		}
	}
	// Keys that are not escapes stay as they are.
	for _, k := range []string{"__0x", "__0xzz__", "__0x110000__", "__0x41_", "x__0x__"} {
		if got := unescapeKey(k); got != k {
			t.Errorf("unescapeKey(%q) = %q", k, got)
		}
	}
}

// FuzzEscapeKey checks that escaping is reversible and gives keys Fila
// accepts: non-empty printable UTF-8.
func FuzzEscapeKey(f *testing.F) {
	for _, s := range []string{"", "a", "__0x", "__0x41__", "_\x00_", "___0x5f__", "\x7f__0x", "☺\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if !utf8.ValidString(k) {
			return // gocloud refuses such metadata before the driver
		}
		e := escapeKey(k)
		if got := unescapeKey(e); got != k {
			t.Fatalf("unescapeKey(escapeKey(%q)) = %q (escaped %q)", k, got, e)
		}
		if e == "" || !utf8.ValidString(e) || strings.ContainsFunc(e, isControl) {
			t.Fatalf("escapeKey(%q) = %q is not a Fila header key", k, e)
		}
	})
}
