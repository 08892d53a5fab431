package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis has no logger per client: its own lines (every failed dial
// during an outage, pool trouble) go to one process-wide logger, set with
// redis.SetLogger, which by default prints to standard error outside any
// slog handler. Importing this package replaces it with goRedisLog, which
// forwards every line to slog at Debug, so Fila's output goes through the
// logger the application gave (fila.WithLogger, Options.Logger):
//
//   - a line that names the address of an open driver's client (go-redis's
//     dial failures do) goes to that driver's logger;
//   - any other line goes to the loggers of the open drivers, once each;
//   - with no driver open, to slog.Default().
//
// Lines about an application's own go-redis clients therefore reach slog
// at Debug too instead of standard error. An application that wants
// go-redis's lines elsewhere calls redis.SetLogger after importing this
// package; Fila's routing then stops, nothing else changes.
func init() { goredis.SetLogger(goRedisLog{}) }

// goRedisLog is the go-redis logger this package installs.
type goRedisLog struct{}

// Printf forwards one go-redis line to slog at Debug (see above).
func (goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	if ctx == nil {
		ctx = context.Background()
	}
	for _, l := range logTargets(msg) {
		l.DebugContext(ctx, "fila/redis: go-redis: "+msg)
	}
}

// logRegistry is the open drivers whose loggers receive go-redis's lines.
var logRegistry = struct {
	sync.Mutex
	drivers map[*Driver][]string // the client's addresses
}{drivers: map[*Driver][]string{}}

// registerLog makes d's logger receive go-redis's lines; Close undoes it.
func registerLog(d *Driver) {
	var addrs []string
	switch c := d.c.(type) {
	case *goredis.Client:
		addrs = []string{c.Options().Addr}
	case *goredis.ClusterClient:
		addrs = append(addrs, c.Options().Addrs...)
	case *goredis.Ring:
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a) // name -> address
		}
	}
	logRegistry.Lock()
	defer logRegistry.Unlock()
	logRegistry.drivers[d] = addrs
}

func unregisterLog(d *Driver) {
	logRegistry.Lock()
	defer logRegistry.Unlock()
	delete(logRegistry.drivers, d)
}

// logTargets returns the loggers a go-redis line goes to.
func logTargets(msg string) []*slog.Logger {
	logRegistry.Lock()
	defer logRegistry.Unlock()
	var named, all []*slog.Logger
	add := func(list []*slog.Logger, l *slog.Logger) []*slog.Logger {
		for _, x := range list {
			if x == l {
				return list
			}
		}
		return append(list, l)
	}
	for d, addrs := range logRegistry.drivers {
		all = add(all, d.o.Logger)
		for _, a := range addrs {
			if a != "" && strings.Contains(msg, a) {
				named = add(named, d.o.Logger)
				break
			}
		}
	}
	switch {
	case len(named) > 0:
		return named
	case len(all) > 0:
		return all
	default:
		return []*slog.Logger{slog.Default()}
	}
}
