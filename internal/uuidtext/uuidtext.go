// Package uuidtext writes and reads UUIDs in their canonical text form, for
// the ids the portable layer makes and the copy ids of topics.
package uuidtext

import "encoding/hex"

// Format returns b as xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func Format(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// Parse reads a UUID in canonical text form.
func Parse(s string) ([16]byte, bool) {
	var b [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	hexs := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(b[:], []byte(hexs)); err != nil {
		return b, false
	}
	return b, true
}
