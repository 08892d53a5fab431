package redis

import (
	"embed"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The driver's Lua scripts are the files of lua/, embedded in the binary.
// Each file starts with a header, the "--" comment lines that document it
// (KEYS, ARGV, reply), then a blank line and the code. lua/prelude.lua
// holds the queue's key names, the layout of its keys and entries, and the
// helpers the queue scripts share; link.go runs each script after only the
// helpers it calls.

//go:embed lua/*.lua
var luaFS embed.FS

// luaUsed records the files of lua/ that luaFile read, so a test can tell
// that none is left over.
var luaUsed = map[string]bool{}

// luaFile returns the code of lua/name: the file less its header, so that
// what Redis runs (and what link looks through for helper calls) is the
// blank line below the header and what follows.
func luaFile(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("fila/redis: " + err.Error())
	}
	luaUsed[name] = true
	s := string(b)
	for strings.HasPrefix(s, "--") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return s
}

// luaScript is one script the driver runs, for the tests: the files it is
// made of and its code before linking.
type luaScript struct {
	files  []string
	body   string
	script *goredis.Script
}

// luaScripts holds every script built by script.
var luaScripts []luaScript

// script builds the script made of the code of the given files of lua/, in
// that order, linked with the prelude helpers it calls.
func script(files ...string) *goredis.Script {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(luaFile(f))
	}
	s := goredis.NewScript(link(b.String()))
	luaScripts = append(luaScripts, luaScript{files: files, body: b.String(), script: s})
	return s
}

// The queue scripts. Each gets the fifteen keys of one queue (keys.list);
// its file documents its ARGV and reply.
var (
	// scriptEnqueue stores a batch of messages: lua/enqueue.lua.
	scriptEnqueue = script("enqueue.lua")
	// scriptReceive is Receive's script path: lua/receive.lua.
	scriptReceive = script("receive.lua")
	// scriptAck settles deliveries: lua/ack.lua.
	scriptAck = script("ack.lua")
	// scriptRetry requeues a delivery's message: lua/retry.lua.
	scriptRetry = script("retry.lua")
	// scriptDead moves a delivery's message to the dead letters: lua/dead.lua.
	scriptDead = script("dead.lua")
	// scriptExtend gives a delivery a new deadline: lua/extend.lua.
	scriptExtend = script("extend.lua")
	// scriptReplay moves dead letters back to the queue: lua/replay.lua.
	scriptReplay = script("replay.lua")
	// scriptPurge deletes dead letters: lua/purge.lua.
	scriptPurge = script("purge.lua")
	// scriptStats counts a queue: lua/stats.lua.
	scriptStats = script("stats.lua")
)
