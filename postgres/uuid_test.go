package postgres

import (
	"fmt"
	"testing"
	"time"

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

// TestParseUUID: parseUUID accepts what validUUID accepts and returns the
// bytes uuidtext.Parse reads, for the text changed at each position in
// turn (a digit of either case, a dash, a character that is neither).
func TestParseUUID(t *testing.T) {
	const base = "0190d5a4-1b2c-7d3e-8f40-a1b2c3d4e5f6"
	inputs := []string{"", base[:35], base + "0", "0190d5a41b2c7d3e8f40a1b2c3d4e5f60000"}
	for i := range base {
		for _, c := range "0aF-g /" {
			inputs = append(inputs, base[:i]+string(c)+base[i+1:])
		}
	}
	for _, s := range inputs {
		got, ok := parseUUID(s)
		if ok != validUUID(s) {
			t.Errorf("parseUUID(%q) ok = %v, validUUID says %v", s, ok, validUUID(s))
			continue
		}
		if want, _ := uuidtext.Parse(s); ok && (got.Bytes != want || !got.Valid) {
			t.Errorf("parseUUID(%q) = %x (valid %v), want %x", s, got.Bytes, got.Valid, want)
		}
	}
}

// TestMemberReceipt: a member's receipt as log_claim returns it (its
// claim's prefix and its position in hex) is written out as the UUID that
// holds the position in its last 8 bytes; any other receipt is left alone.
func TestMemberReceipt(t *testing.T) {
	const prefix = "0123abcd-ef01-0234-"
	claim := pgUUID(prefix + "0000-000000000000")
	for _, pos := range []uint64{0, 1, 0xabc, 1 << 32, 1<<62 - 1, 1<<64 - 1} {
		got := memberReceipt(prefix + fmt.Sprintf("%x", pos))
		want := fmt.Sprintf("%s%04x-%012x", prefix, pos>>48, pos&(1<<48-1))
		if got != want {
			t.Errorf("memberReceipt(position %x) = %s, want %s", pos, got, want)
		}
		u := pgUUID(got)
		if !u.Valid || [8]byte(u.Bytes[:8]) != [8]byte(claim.Bytes[:8]) {
			t.Errorf("memberReceipt(position %x) = %s: not the claim's member", pos, got)
		}
	}
	for _, s := range []string{"", "0123abcd-ef01-4234-8000-000000000002", prefix, prefix + "10000000000000000", "short"} {
		if got := memberReceipt(s); got != s {
			t.Errorf("memberReceipt(%q) = %q, want it unchanged", s, got)
		}
	}
}

// TestClaimSizes: a claim is whole at the count its receive returned, not
// after it is forgotten, and the memo stays bounded when claims are never
// acked whole.
func TestClaimSizes(t *testing.T) {
	var c claimSizes
	key := [8]byte{1}
	c.add(key, 3, time.Now().Add(time.Minute))
	if !c.whole(key, 3) || c.whole(key, 2) || c.whole([8]byte{2}, 3) {
		t.Errorf("whole: want true for the claim's count only")
	}
	c.forget(key)
	if c.whole(key, 3) {
		t.Errorf("whole after forget: want false")
	}
	past := time.Now().Add(-time.Second)
	for i := range 5 * claimSizesMax {
		c.add([8]byte{byte(i), byte(i >> 8), 7}, 1, past)
	}
	if n := len(c.m); n > 2*claimSizesMax {
		t.Errorf("%d claims remembered; want at most %d", n, 2*claimSizesMax)
	}
	live := time.Now().Add(time.Minute)
	for i := range 5 * claimSizesMax {
		c.add([8]byte{byte(i), byte(i >> 8), 9}, 1, live)
	}
	if n := len(c.m); n > 2*claimSizesMax {
		t.Errorf("%d live claims remembered; want at most %d", n, 2*claimSizesMax)
	}
}
