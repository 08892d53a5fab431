package redis

import (
	"strings"
	"testing"
)

// Every linked script defines each prelude helper it calls, before the
// first call, and leaves out the ones it does not call.
func TestLinkIncludesWhatScriptsCall(t *testing.T) {
	if len(preludeHelpers) < 30 || !strings.Contains(preludeHead, "local KS,") || !strings.Contains(preludeHead, "local PAD") {
		t.Fatalf("prelude split into %d helpers, head %q", len(preludeHelpers), preludeHead)
	}
	bodies := map[string]string{
		"enqueue": luaEnqueue, "receive": luaReceive, "ack": luaAck, "retry": luaRetry, "dead": luaDead,
		"extend": luaExtend, "replay": luaReplay, "purge": luaPurge, "stats": luaStats,
		"receive-post": luaReceivePost, "receive-delayed": luaReceiveDelayed, "dead-import": luaDeadImport,
	}
	for name, body := range bodies {
		linked := link(body)
		for _, h := range preludeHelpers {
			def := strings.Index(linked, "local function "+h.name+"(")
			loc := h.calls.FindAllStringIndex(linked, -1)
			var callAt []int
			for _, l := range loc {
				if def < 0 || l[0] != def+len("local function ") {
					callAt = append(callAt, l[0])
				}
			}
			switch {
			case len(callAt) > 0 && def < 0:
				t.Errorf("%s calls %s but the linked script does not define it", name, h.name)
			case len(callAt) > 0 && callAt[0] < def:
				t.Errorf("%s calls %s before defining it", name, h.name)
			case len(callAt) == 0 && def >= 0:
				t.Errorf("%s defines %s without calling it", name, h.name)
			}
		}
		if len(linked) >= len(luaPrelude)+len(body) && name != "receive" {
			t.Logf("%s links the whole prelude", name)
		}
	}
	// the receive-post script, run with every batch Receive, carries little
	if n, all := len(link(luaReceivePost)), len(luaPrelude)+len(luaReceivePost); n > all*3/4 {
		t.Errorf("the receive post script links %d of %d bytes", n, all)
	}
}
