package fila

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

var idState struct {
	sync.Mutex
	lastMS  int64
	counter uint16
}

// newID returns a UUID version 7 in canonical text form. Ids of one process
// sort by creation time (a 12-bit counter orders ids of the same millisecond).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)

	idState.Lock()
	ms := time.Now().UnixMilli()
	if ms <= idState.lastMS {
		idState.counter++
		if idState.counter > 0x0fff { // counter overflow: borrow the next millisecond
			idState.lastMS++
			idState.counter = 0
		}
		ms = idState.lastMS
	} else {
		idState.lastMS = ms
		idState.counter = 0
	}
	counter := idState.counter
	idState.Unlock()

	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(ms))
	copy(b[0:6], ts[2:8])
	b[6] = 0x70 | byte(counter>>8)
	b[7] = byte(counter)
	b[8] = b[8]&0x3f | 0x80

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
