package postgres_test

import (
	"context"
	"testing"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestKindRegexp checks, on the server, that the regular expression the log
// mode matches a subscription's kinds with agrees with backend.KindMatch
// over every pair of a table of patterns and kinds: wildcards alone, first,
// middle and last, empty words, and characters regular expressions treat
// specially.
func TestKindRegexp(t *testing.T) {
	pool := testPool(t)
	patterns := []string{
		"#", "*", "a", "a.*", "a.#", "#.a", "a.#.b", "#.b.#", "*.*", "*.#", "#.*", "#.#", "a.*.b", "a..b",
		"a*", "a+b", "(a|b)", "[a]", "a\\b", "^a$", "é.*", "a b", "a?", "{1}", "order.*.refunded",
	}
	kinds := []string{
		"a", "b", "ab", "a*", "a.b", "b.a", "a.b.c", "a..b", "a.", ".a", ".", "..", "x.a", "a.x.y.b", "x.b.y",
		"aab", "a+b", "(a|b)", "a", "[a]", "a\\b", "^a$", "é.x", "é", "a b", "a?", "{1}", "order.br.refunded",
	}
	ctx := context.Background()
	for _, p := range patterns {
		re := postgres.KindRegexp(p)
		for _, k := range kinds {
			var got bool
			if err := pool.QueryRow(ctx, `SELECT ('.' || $2::text) ~ $1`, re, k).Scan(&got); err != nil {
				t.Fatalf("pattern %q (expression %q), kind %q: %v", p, re, k, err)
			}
			if want := backend.KindMatch(p, k); got != want {
				t.Errorf("pattern %q (expression %q), kind %q: the server says %v, KindMatch %v", p, re, k, got, want)
			}
		}
	}
}
