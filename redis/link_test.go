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
	prelude := luaFile("prelude.lua")
	for _, ls := range luaScripts {
		name, body := ls.files[len(ls.files)-1], ls.body
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
		if len(linked) >= len(prelude)+len(body) && name != "receive.lua" {
			t.Logf("%s links the whole prelude", name)
		}
	}
	// the receive-post script, run with every batch Receive, carries little
	post := luaFile("receive_post.lua")
	if n, all := len(link(post)), len(prelude)+len(post); n > all*3/4 {
		t.Errorf("the receive post script links %d of %d bytes", n, all)
	}
}
