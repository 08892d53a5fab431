package filapubsub

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Metadata keys become Fila header keys. Fila refuses header keys that are
// empty or hold control characters (U+0000–U+001F, U+007F), which gocloud
// allows, so such keys are escaped reversibly, in the style of gocloud's
// own drivers (escape.HexEscape): each control character becomes
// "__0x<hex>__", the empty key becomes "__0x__", and the '_' that starts a
// literal "__0x" in a key becomes "__0x5f__" so that the decoding is exact.
// Every other key, and every value, is stored as it is. Received header
// keys are decoded the same way, so a header a Fila producer set with a
// literal "__0x41__" in its key reaches gocloud as "A".

const escapeMark = "__0x"

// escapeKey returns the Fila header key that stands for metadata key k.
func escapeKey(k string) string {
	if k == "" {
		return escapeMark + "__"
	}
	if !needsEscape(k) {
		return k
	}
	var b strings.Builder
	b.Grow(len(k) + 16)
	for i, r := range k {
		if isControl(r) || r == '_' && strings.HasPrefix(k[i:], escapeMark) {
			b.WriteString(escapeMark)
			b.WriteString(strconv.FormatInt(int64(r), 16))
			b.WriteString("__")
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func needsEscape(k string) bool {
	if strings.Contains(k, escapeMark) {
		return true
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// unescapeKey reverses escapeKey. A key without escapes is returned as it
// is; an escape that does not decode to a rune is kept literally.
func unescapeKey(k string) string {
	if k == escapeMark+"__" {
		return ""
	}
	if !strings.Contains(k, escapeMark) {
		return k
	}
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); {
		if strings.HasPrefix(k[i:], escapeMark) {
			j := i + len(escapeMark)
			for j < len(k) && isHex(k[j]) {
				j++
			}
			if j > i+len(escapeMark) && j-i-len(escapeMark) <= 8 && strings.HasPrefix(k[j:], "__") {
				n, err := strconv.ParseInt(k[i+len(escapeMark):j], 16, 32)
				if err == nil && utf8.ValidRune(rune(n)) {
					b.WriteRune(rune(n))
					i = j + 2
					continue
				}
			}
		}
		b.WriteByte(k[i])
		i++
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// encodeMetadata returns the Fila headers for gocloud metadata.
func encodeMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	h := make(map[string]string, len(md))
	for k, v := range md {
		h[escapeKey(k)] = v
	}
	return h
}

// decodeMetadata returns the gocloud metadata for Fila headers.
func decodeMetadata(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	md := make(map[string]string, len(h))
	for k, v := range h {
		md[unescapeKey(k)] = v
	}
	return md
}
