package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback in front of a real server, for tests that
// need a connection to break without touching the shared server: Break
// closes the listener and every proxied connection (clients see a reset or
// EOF, and new connections are refused), Restore listens again on the same
// address. Only the test's own connections go through it. StallNext holds
// the next reply, for a client whose read times out after the server ran its
// command.
type Proxy struct {
	target string
	addr   string
	stall  atomic.Int64  // ns to hold the next server-to-client bytes
	done   chan struct{} // closed when the test ends: a held reply is dropped

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port) on a free loopback port
// and stops it when the test ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: proxy listen: %v", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.serve(ln)
	tb.Cleanup(func() {
		close(p.done)
		p.Break()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// StallNext holds the next bytes any server sends back for d before passing
// them on (to a client that may have given up and closed its connection by
// then): the server has run the command, the client does not hear of it.
func (p *Proxy) StallNext(d time.Duration) { p.stall.Store(int64(d)) }

// Break closes the listener and every open connection.
func (p *Proxy) Break() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the proxy's address after Break.
func (p *Proxy) Restore(tb testing.TB) {
	tb.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		tb.Fatalf("testenv: proxy listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !p.track(ln, c, s) {
				continue
			}
			p.wg.Add(2)
			go p.pipe(c, s, true)
			go p.pipe(s, c, false)
		}
	}()
}

// track records a proxied pair, unless the listener was closed meanwhile.
func (p *Proxy) track(ln net.Listener, c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		_ = c.Close()
		_ = s.Close()
		return false
	}
	p.conns[c] = struct{}{}
	p.conns[s] = struct{}{}
	return true
}

// pipe copies src to dst; reply marks the server-to-client direction,
// where StallNext applies.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	if !reply {
		_, _ = io.Copy(dst, src)
	} else {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := p.stall.Swap(0); d > 0 {
					t := time.NewTimer(time.Duration(d))
					select {
					case <-t.C:
					case <-p.done: // Break closed dst: the write below fails
						t.Stop()
					}
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// SilentServer listens on a free loopback port, accepts connections and
// never answers, like a broker that hangs; it returns its host:port. It
// stops when the test ends.
func SilentServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: silent server listen: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// ClosedPort is a loopback address where nothing listens: connecting to it
// is refused at once.
const ClosedPort = "127.0.0.1:1"
