package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// The kind matcher of lua/prelude.lua (kwords, kmatch), as the topic
// scripts call it, agrees with backend.KindMatch on the real server: every
// pattern of up to three words over {a, b, "", *, #} against every kind of
// up to four words over {a, b, ""}, then edge cases by hand.
func TestLuaKindMatch(t *testing.T) {
	raw := testenv.RedisURL(t)
	opt, err := goredis.ParseURL(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	patterns := seqs([]string{"a", "b", "", "*", "#"}, 3)
	kinds := seqs([]string{"a", "b", ""}, 4)
	hand := []string{
		"#", "*", "a", "a.*", "a.#", "#.a", "a.#.b", "#.b.#", "*.*", "*.#", "a.*.b", "a*", "a..b", "#a", "*a",
		"order.*.refunded", "*.brazil.#", "#.#", "#.*.#", "a.#.b.#.c", "#.b.#.c", "*.#.*", ".", "..", "a.", ".a", "#.", ".#",
		"a b", "é.*", "a.b.c.d.e.f", "#.#.#.a", "",
	}
	patterns = append(patterns, hand...)
	kinds = append(kinds, hand...)
	kinds = append(kinds, "order.brazil.refunded", "order.refunded", "order.brazil.created.late", "w.x.y.z.a",
		"a.b.x.b.y.c", "a.b.c.b.c", "a.b.c.d.e.f.g", "x.b.y.c", "a.x.y.b", "é.x")

	s := goredis.NewScript(link(`
local out = {}
for i = 1, #ARGV, 2 do
  local p, k = ARGV[i], ARGV[i + 1]
  out[#out + 1] = (p == '' or kmatch(kwords(p), kwords(k))) and 1 or 0
end
return out
`))
	type pair struct{ p, k string }
	var pairs []pair
	for _, p := range patterns {
		for _, k := range kinds {
			pairs = append(pairs, pair{p, k})
		}
	}
	const batch = 5000
	bad := 0
	for i := 0; i < len(pairs); i += batch {
		chunk := pairs[i:min(i+batch, len(pairs))]
		args := make([]any, 0, 2*len(chunk))
		for _, pk := range chunk {
			args = append(args, pk.p, pk.k)
		}
		got, err := s.Run(ctx, c, nil, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(chunk) {
			t.Fatalf("script returned %d results for %d pairs", len(got), len(chunk))
		}
		for j, pk := range chunk {
			if want := backend.KindMatch(pk.p, pk.k); (got[j] == 1) != want {
				if bad++; bad <= 20 {
					t.Errorf("Lua: %q matches %q = %v; backend.KindMatch says %v", pk.p, pk.k, got[j] == 1, want)
				}
			}
		}
	}
	if bad > 20 {
		t.Errorf("... %d mismatches in all", bad)
	}
	t.Logf("%d pairs checked", len(pairs))
}

// seqs returns every dot-joined sequence of 1 to n words of words.
func seqs(words []string, n int) []string {
	var out []string
	cur := [][]string{{}}
	for range n {
		var next [][]string
		for _, c := range cur {
			for _, w := range words {
				s := append(append([]string{}, c...), w)
				next = append(next, s)
				out = append(out, strings.Join(s, "."))
			}
		}
		cur = next
	}
	return out
}
