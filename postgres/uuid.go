package postgres

import (
	"encoding/binary"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"
)

// validUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex
// form (any case). Ids and receipts that are not UUIDs cannot match a row;
// checking them here keeps the server from rejecting a whole batch.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// pgUUID returns s, a UUID validUUID accepted, in binary form. pgx cannot
// encode a Go string as a binary uuid: it built an error holding the whole
// value (for an array, every element quoted), then fell back to the text
// format, which cost about ten times the binary encoding per id.
func pgUUID(s string) pgtype.UUID {
	var u pgtype.UUID
	j := 0
	for i := 0; i < len(s) && j < 16; i++ {
		if s[i] == '-' {
			continue
		}
		u.Bytes[j] = unhex(s[i])<<4 | unhex(s[i+1])
		i++
		j++
	}
	u.Valid = j == 16
	return u
}

// parseUUID is validUUID and pgUUID in one pass: s in binary form, and
// whether s is a UUID in its 36-character form.
func parseUUID(s string) (u pgtype.UUID, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	for j, i := range uuidHexAt {
		hi, ok1 := hexDigit(s[i])
		lo, ok2 := hexDigit(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u.Bytes[j] = hi<<4 | lo
	}
	u.Valid = true
	return u, true
}

// uuidHexAt are the offsets of a UUID's 16 bytes in its 36-character form.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// hexDigit is the value of the hex digit c, and whether c is one.
func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// pgUUIDs is pgUUID over a slice.
func pgUUIDs(ss []string) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ss))
	for i, s := range ss {
		out[i] = pgUUID(s)
	}
	return out
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

// claimRuns reports whether receipts are those of members of one claim of
// the log mode, each once: then it returns the claim's token and the runs of
// their positions (the first and last of each run of consecutive ones), as
// log_ack_claim takes them. A member's receipt is the claim's token with the
// member's position in its last 8 bytes; its version nibble is 0, where a
// lease's own token is a version 4 UUID (migrations/0011_log_claim_runs.sql).
func claimRuns(receipts []pgtype.UUID) (token pgtype.UUID, runs []int64, ok bool) {
	if len(receipts) < 2 {
		return token, nil, false // one lease: log_ack costs no more
	}
	pos := make([]int64, len(receipts))
	for i, r := range receipts {
		key, p, ok := memberBytes(r)
		if !ok {
			return token, nil, false
		}
		if i == 0 {
			copy(token.Bytes[:8], key[:])
			token.Valid = true
		} else if key != [8]byte(token.Bytes[:8]) {
			return token, nil, false
		}
		if p >= 1<<62 {
			return token, nil, false // no position: log_ack reports it
		}
		pos[i] = int64(p)
	}
	slices.Sort(pos)
	for i, p := range pos {
		switch {
		case i > 0 && p == pos[i-1]:
			return token, nil, false // a repeated ref: log_ack reports it
		case i == 0 || p != pos[i-1]+1:
			if i > 0 {
				runs = append(runs, pos[i-1])
			}
			runs = append(runs, p)
		}
	}
	return token, append(runs, pos[len(pos)-1]), true
}

// memberOf reports whether r is the receipt of a claim member (a UUID whose
// version nibble is 0), and then returns the first 8 bytes its claim's token
// and it share, and its position.
func memberOf(r string) (key [8]byte, pos uint64, ok bool) {
	return memberBytes(pgUUID(r))
}

// memberBytes is memberOf for a receipt in binary form.
func memberBytes(u pgtype.UUID) (key [8]byte, pos uint64, ok bool) {
	if !u.Valid || u.Bytes[6] >= 16 {
		return key, 0, false
	}
	return [8]byte(u.Bytes[:8]), binary.BigEndian.Uint64(u.Bytes[8:]), true
}

// memberReceipt writes out the receipt of a claim member as the log mode's
// receive returns it, its claim's first 19 characters ("xxxxxxxx-xxxx-
// 0xxx-") and its position in hex, as the UUID it is: the position in the
// last 8 bytes. Anything else is returned as it is.
func memberReceipt(s string) string {
	const prefix = 19
	n := len(s) - prefix
	if n < 1 || n > 16 {
		return s
	}
	var b [36]byte
	copy(b[:prefix], s[:prefix])
	var h [16]byte
	for i := range h {
		h[i] = '0'
	}
	copy(h[16-n:], s[prefix:])
	copy(b[prefix:prefix+4], h[:4])
	b[prefix+4] = '-'
	copy(b[prefix+5:], h[4:])
	return string(b[:])
}
