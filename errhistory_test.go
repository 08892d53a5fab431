package fila

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func sameErrors(a, b []AttemptError) bool {
	return slices.EqualFunc(a, b, func(x, y AttemptError) bool {
		return x.Attempt == y.Attempt && x.At.Equal(y.At) && x.Reason == y.Reason
	})
}

func TestErrorHistoryRoundTrip(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	h := []AttemptError{
		{Attempt: 1, At: t0, Reason: "boom"},
		{Attempt: 2, At: t0.Add(time.Second), Reason: "line one\nline two\r\n\ttab \x1b[31mred\x1b[0m"},
		{Attempt: 3, At: t0.Add(2 * time.Second), Reason: ""},
		{Attempt: 4, At: t0.Add(3 * time.Second), Reason: "é😀\x00nul and " + errorsMagic + "1 2 3\n"},
	}
	enc := encodeErrors(h)
	if !strings.HasPrefix(enc, errorsMagic) || !utf8.ValidString(enc) {
		t.Fatalf("encoded %q: want the magic first line and valid UTF-8", enc)
	}
	if got := decodeErrors(enc); !sameErrors(got, h) {
		t.Fatalf("decode(encode(h)) = %+v, want %+v", got, h)
	}
	// Nothing is escaped: the encoding costs the headers and no more.
	size := len(errorsMagic)
	for _, e := range h {
		size += len(e.Reason)
	}
	if len(enc) > size+len(h)*maxEntryHeader {
		t.Errorf("encoded %d bytes for %d of reasons", len(enc), size)
	}
	if strings.Count(enc, "\x00") != 1 {
		t.Errorf("encoded %q: want the reason's one NUL and no other", enc)
	}
	latest, all := splitErrors(enc)
	if latest != h[3].Reason || len(all) != 4 {
		t.Errorf("splitErrors: latest %q, %d entries", latest, len(all))
	}
}

func TestErrorHistoryPlainAndMalformed(t *testing.T) {
	if h := decodeErrors(""); h != nil {
		t.Errorf(`decode("") = %+v, want nil`, h)
	}
	if latest, h := splitErrors(""); latest != "" || h != nil {
		t.Errorf(`splitErrors("") = %q, %+v`, latest, h)
	}
	for _, s := range []string{
		"boom: upstream 503",
		"multi\nline",
		errorsMagic,                                     // no entry
		errorsMagic + "1 2 3\nab\n",                     // too short a reason
		errorsMagic + "1 2 3\nabcd\n",                   // too long a reason
		errorsMagic + "1 2 3\nabc",                      // no closing newline
		errorsMagic + "1 2 3\nabc\nrest",                // trailing garbage
		errorsMagic + "-1 2 3\nabc\n",                   // a sign
		errorsMagic + "1 +2 3\nabc\n",                   // a sign
		errorsMagic + "1 2\nab\n",                       // two fields
		errorsMagic + "1 2 3 4\nabc\n",                  // four fields
		errorsMagic + "1  2 3\nabc\n",                   // an empty field
		errorsMagic + "99999999999 2 3\nabc\n",          // an attempt past MaxInt32
		errorsMagic + "1 99999999999999999999 3\nabc\n", // past int64
		"fila-errors/2\n1 2 3\nabc\n",                   // another version
		"\xff\xfe not UTF-8",
	} {
		h := decodeErrors(s)
		if len(h) != 1 || h[0].Reason != s || h[0].Attempt != 0 || !h[0].At.IsZero() {
			t.Errorf("decode(%q) = %+v, want it as one plain reason of unknown attempt and time", s, h)
		}
		if latestError(s) != s {
			t.Errorf("latestError(%q) = %q", s, latestError(s))
		}
	}
	// A history built on a plain reason keeps it as its first error.
	enc := withError("legacy reason", 3, time.UnixMicro(1e15), "new")
	want := []AttemptError{{Reason: "legacy reason"}, {Attempt: 3, At: time.UnixMicro(1e15), Reason: "new"}}
	if got := decodeErrors(enc); !sameErrors(got, want) {
		t.Errorf("history on a plain reason: %+v, want %+v", got, want)
	}
}

func TestErrorHistoryKeepsTheLatest(t *testing.T) {
	long := strings.Repeat("é", MaxReasonBytes) // 2 bytes each: twice the limit
	stored := ""
	at := time.UnixMicro(1_700_000_000_000_000)
	for attempt := 1; attempt <= MaxErrorHistory+3; attempt++ {
		stored = withError(stored, attempt, at.Add(time.Duration(attempt)*time.Second), long)
		h := decodeErrors(stored)
		if want := min(attempt, MaxErrorHistory); len(h) != want {
			t.Fatalf("after %d errors: %d kept, want %d", attempt, len(h), want)
		}
		for i, e := range h {
			limit := MaxEarlierReasonBytes
			if i == len(h)-1 {
				limit = MaxReasonBytes
			}
			if len(e.Reason) != limit || !strings.HasPrefix(long, e.Reason) {
				t.Fatalf("after %d errors, entry %d: %d bytes, want the first %d of the reason", attempt, i, len(e.Reason), limit)
			}
			if wantAttempt := attempt - len(h) + 1 + i; e.Attempt != wantAttempt {
				t.Fatalf("after %d errors, entry %d: attempt %d, want %d", attempt, i, e.Attempt, wantAttempt)
			}
			if !e.At.Equal(at.Add(time.Duration(e.Attempt) * time.Second)) {
				t.Fatalf("entry of attempt %d at %v", e.Attempt, e.At)
			}
		}
		if len(stored) > MaxErrorHistoryBytes {
			t.Fatalf("after %d errors: %d bytes stored, over MaxErrorHistoryBytes (%d)", attempt, len(stored), MaxErrorHistoryBytes)
		}
	}
	// A reason cut inside a character is cut before it.
	odd := "a" + strings.Repeat("😀", MaxEarlierReasonBytes)
	h := decodeErrors(withError(withError("", 1, at, odd), 2, at, "x"))
	if len(h) != 2 || len(h[0].Reason) != 1+4*((MaxEarlierReasonBytes-1)/4) || !utf8.ValidString(h[0].Reason) {
		t.Errorf("an earlier reason of 4-byte characters: %d bytes, valid %v", len(h[0].Reason), utf8.ValidString(h[0].Reason))
	}
}

// TestErrorHistoryBound: the worst case stays within MaxErrorHistoryBytes,
// the bound drivers are told.
func TestErrorHistoryBound(t *testing.T) {
	at := time.UnixMicro(math.MaxInt64)
	var h []AttemptError
	for i := 0; i < MaxErrorHistory+2; i++ {
		h = append(h, AttemptError{Attempt: math.MaxInt, At: at, Reason: strings.Repeat("a", 3*MaxReasonBytes)})
	}
	enc := encodeErrors(h)
	if len(enc) > MaxErrorHistoryBytes {
		t.Errorf("worst case: %d bytes, over MaxErrorHistoryBytes (%d)", len(enc), MaxErrorHistoryBytes)
	}
	if len(enc) < MaxErrorHistoryBytes-MaxErrorHistory*2 {
		t.Errorf("worst case: %d bytes, far under MaxErrorHistoryBytes (%d): is the bound right?", len(enc), MaxErrorHistoryBytes)
	}
	got := decodeErrors(enc)
	if len(got) != MaxErrorHistory || got[0].Attempt != math.MaxInt32 || got[0].At.UnixMicro() != math.MaxInt64 {
		t.Errorf("worst case decoded: %d entries, attempt %d, time %d", len(got), got[0].Attempt, got[0].At.UnixMicro())
	}
	// Unknown and impossible attempts and times.
	got = decodeErrors(encodeErrors([]AttemptError{{Attempt: -3, At: time.Unix(-5, 0), Reason: "r"}}))
	if len(got) != 1 || got[0].Attempt != 0 || !got[0].At.IsZero() {
		t.Errorf("a negative attempt and time: %+v, want them unknown", got)
	}
}

// TestErrorHistoryNULAsReplacement: PostgreSQL's postgres driver stores a
// NUL as U+FFFD (three bytes for one); the history still decodes, with the
// replacement in the reason, as a plain reason showed it before.
func TestErrorHistoryNULAsReplacement(t *testing.T) {
	at := time.UnixMicro(1_700_000_000_000_000)
	enc := withError(withError("", 1, at, "a\x00b\x00"), 2, at, "\x00c")
	pg := strings.ReplaceAll(enc, "\x00", "\uFFFD")
	want := []AttemptError{{Attempt: 1, At: at, Reason: "a\uFFFDb\uFFFD"}, {Attempt: 2, At: at, Reason: "\uFFFDc"}}
	if got := decodeErrors(pg); !sameErrors(got, want) {
		t.Errorf("with NUL stored as U+FFFD: %+v, want %+v", got, want)
	}
}

// FuzzErrorHistory: decoding never panics, whatever it is given; a history
// with one more error decodes to what was kept of it, within the bound,
// and encodes again to the same string.
func FuzzErrorHistory(f *testing.F) {
	at := time.UnixMicro(1_700_000_000_000_000)
	f.Add("", 1, int64(0), "boom")
	f.Add("legacy", 2, int64(1_700_000_000_000_000), "again\nwith lines")
	f.Add(withError(withError("", 1, at, "a"), 2, at, "b\x00"), 3, int64(-1), "c")
	f.Add(errorsMagic+"1 2 3\nabc\n", 0, int64(5), "")
	f.Add(errorsMagic+"1 2 9999999\n", 7, int64(math.MaxInt64), "\xff")
	f.Fuzz(func(t *testing.T, stored string, attempt int, us int64, reason string) {
		prev := decodeErrors(stored)
		if stored != "" && len(prev) == 0 {
			t.Fatalf("decode(%q) is empty", stored)
		}
		var when time.Time
		if us != 0 {
			when = time.UnixMicro(us)
		}
		enc := withError(stored, attempt, when, reason)
		if len(enc) > MaxErrorHistoryBytes || !utf8.ValidString(enc) {
			t.Fatalf("encoded %d bytes, valid UTF-8 %v", len(enc), utf8.ValidString(enc))
		}
		got := decodeErrors(enc)
		want := append(prev, AttemptError{Attempt: attempt, At: when, Reason: reason})
		if len(want) > MaxErrorHistory {
			want = want[len(want)-MaxErrorHistory:]
		}
		if len(got) != len(want) {
			t.Fatalf("decoded %d errors, want %d", len(got), len(want))
		}
		for i, w := range want {
			limit := MaxEarlierReasonBytes
			if i == len(want)-1 {
				limit = MaxReasonBytes
			}
			w.Reason = cutReason(w.Reason, limit)
			w.Attempt = min(max(w.Attempt, 0), math.MaxInt32)
			if !w.At.IsZero() && w.At.UnixMicro() <= 0 {
				w.At = time.Time{}
			}
			if g := got[i]; g.Attempt != w.Attempt || !g.At.Equal(w.At) || g.Reason != w.Reason {
				t.Fatalf("entry %d: %+v, want %+v", i, g, w)
			}
		}
		if again := encodeErrors(got); again != enc {
			t.Fatalf("encode(decode(enc)) differs:\n%q\n%q", again, enc)
		}
		// Where a broker stores NUL as U+FFFD, the entries survive.
		if pg := strings.ReplaceAll(enc, "\x00", "\uFFFD"); pg != enc {
			if n := len(decodeErrors(pg)); n != len(got) {
				t.Fatalf("with NUL as U+FFFD: %d entries, want %d", n, len(got))
			}
		}
	})
}
