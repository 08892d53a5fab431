package postgres

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
