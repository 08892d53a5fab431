package backend

import "testing"

func TestKindMatch(t *testing.T) {
	cases := []struct {
		pattern, kind string
		want          bool
	}{
		{"", "a.b", true},
		{"#", "a", true},
		{"#", "a.b.c", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{"a", "a", true},
		{"a", "b", false},
		{"a", "a.b", false},
		{"a.*", "a.b", true},
		{"a.*", "a", false},
		{"a.*", "a.b.c", false},
		{"a.#", "a", true},
		{"a.#", "a.b.c", true},
		{"a.#", "b.a", false},
		{"#.a", "a", true},
		{"#.a", "x.y.a", true},
		{"#.a", "a.x", false},
		{"a.#.b", "a.b", true},
		{"a.#.b", "a.x.y.b", true},
		{"a.#.b", "a.x.y.c", false},
		{"a.#.b", "a.b.b", true},
		{"#.b.#", "b", true},
		{"#.b.#", "x.b.y", true},
		{"#.b.#", "x.c.y", false},
		{"*.*", "a.b", true},
		{"*.*", "a", false},
		{"*.#", "a", true},
		{"#.*", "a.b.c", true},
		{"#.#", "a", true},
		{"a.*.b", "a..b", true},
		{"a.b", "a..b", false},
		{"a.*", "a.", true},
		{"a*", "ab", false},
		{"a*", "a*", true},
		{"order.*.refunded", "order.br.refunded", true},
		{"order.*.refunded", "order.refunded", false},
		{"*.brazil.*", "order.brazil.created", true},
		{"*.brazil.*", "brazil.order.created", false},
	}
	for _, c := range cases {
		if got := KindMatch(c.pattern, c.kind); got != c.want {
			t.Errorf("KindMatch(%q, %q) = %v, want %v", c.pattern, c.kind, got, c.want)
		}
	}
}

func TestKindMatchAny(t *testing.T) {
	if !KindMatchAny(nil, "x") {
		t.Error("no patterns must match every kind")
	}
	if !KindMatchAny([]string{"a", "x.#"}, "x.y") || KindMatchAny([]string{"a", "b"}, "c") {
		t.Error("KindMatchAny must match when one pattern does, and only then")
	}
}
