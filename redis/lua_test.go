package redis

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/internal/testenv"
)

// Every file of lua/ is a documented .lua file that some script is made
// of: a file left over, misnamed or not embedded fails here.
func TestLuaFilesAllUsed(t *testing.T) {
	es, err := os.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) == 0 {
		t.Fatal("lua/ is empty")
	}
	for _, e := range es {
		name := e.Name()
		switch {
		case e.IsDir() || filepath.Ext(name) != ".lua":
			t.Errorf("lua/%s is not a .lua file", name)
		case !luaUsed[name]:
			t.Errorf("lua/%s is not used by any script", name)
		default:
			b, err := luaFS.ReadFile("lua/" + name)
			if err != nil {
				t.Errorf("lua/%s is not embedded: %v", name, err)
			} else if !bytes.HasPrefix(b, []byte("--")) {
				t.Errorf("lua/%s does not start with its header comment", name)
			}
		}
	}
	if len(luaScripts) < 15 {
		t.Errorf("only %d scripts registered", len(luaScripts))
	}
}

// Every script compiles on the real server: SCRIPT LOAD returns its SHA1,
// the one go-redis sends with EVALSHA.
func TestScriptsLoad(t *testing.T) {
	raw := testenv.RedisURL(t)
	opt, err := goredis.ParseURL(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ls := range luaScripts {
		sha, err := ls.script.Load(ctx, c).Result()
		if err != nil {
			t.Errorf("SCRIPT LOAD of %s: %v", strings.Join(ls.files, " + "), err)
		} else if sha != ls.script.Hash() {
			t.Errorf("SCRIPT LOAD of %s returned %s, want %s", strings.Join(ls.files, " + "), sha, ls.script.Hash())
		}
	}
}

// Each file parses as Lua 5.1 (Redis's Lua), by luac -p, when luac is
// installed (Debian: lua5.1).
func TestLuaFilesParse(t *testing.T) {
	luac := lookLua(t, "luac", "lua5.1")
	files, err := filepath.Glob("lua/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no lua/*.lua: %v", err)
	}
	out, err := exec.Command(luac, append([]string{"-p"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("luac -p: %v\n%s", err, out)
	}
}

// Each linked script, as Redis runs it, reads and sets no global beyond
// what Redis provides (a misspelt or unlinked helper would fail only when
// run), by luacheck, when it is installed (Debian: lua-check).
func TestScriptsGlobals(t *testing.T) {
	luacheck := lookLua(t, "luacheck", "lua-check")
	for _, ls := range luaScripts {
		name := strings.Join(ls.files, "+")
		cmd := exec.Command(luacheck, "-", "--filename", name, "--std", "lua51", "--codes", "--formatter", "plain",
			"--read-globals", "KEYS", "ARGV", "redis", "cmsgpack", "cjson", "bit", "struct", "--only", "0", "1")
		cmd.Stdin = strings.NewReader(link(ls.body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("luacheck of linked %s: %v\n%s", name, err, out)
		}
	}
}

// lookLua returns the path of program, or skips the test naming the Debian
// package that has it.
func lookLua(t *testing.T, program, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		t.Skipf("%s is not installed (Debian package %s): check skipped", program, pkg)
	}
	return p
}
