package fila

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/fila-go/fila/internal/uuidtext"
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

	return uuidtext.Format(b)
}
