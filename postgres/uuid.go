package postgres

import "github.com/jackc/pgx/v5/pgtype"

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
