// Package faultproxy is a TCP proxy for fault tests. It sits between dtq and
// a real redis-server and, on command, resets every connection, refuses new
// ones (an outage), delays replies, or lets a matching request through and
// then cuts the connection before its reply arrives (the write landed, the
// answer was lost). It knows nothing of Redis beyond matching bytes.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	links   map[*link]struct{}
	down    bool
	latency time.Duration
	cut     [][]byte // requests containing every one of these are cut
	cutLeft int
	cutSend bool      // cut after sending the request (its reply is lost), else before
	replace [2][]byte // replies have replace[0] replaced by replace[1]
	closed  bool

	wg sync.WaitGroup

	resets, cuts atomic.Int64
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	muted          atomic.Bool // replies are dropped: the link is being cut
	once           sync.Once
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Resets counts connections reset by ResetAll, SetDown or refused while down.
func (p *Proxy) Resets() int64 { return p.resets.Load() }

// Cuts counts the matching requests whose connection was (or is being)
// cut, before or after sending them.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || p.down {
			p.mu.Unlock()
			p.resets.Add(1)
			reset(c)
			continue
		}
		p.mu.Unlock()
		s, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", p.target)
		if err != nil {
			reset(c)
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed || p.down {
			p.mu.Unlock()
			l.close()
			continue
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pumpUp(l)
		go p.pumpDown(l)
	}
}

// pumpUp forwards client -> server, watching for the request to cut after.
func (p *Proxy) pumpUp(l *link) {
	defer p.wg.Done()
	defer p.drop(l)
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			cut, send := p.shouldCut(buf[:n])
			if cut && !send {
				return // the request never reaches the server
			}
			if cut {
				l.muted.Store(true) // the reply must not reach the client
			}
			if _, werr := l.server.Write(buf[:n]); werr != nil {
				return
			}
			if cut {
				// Give the server time to run the request, then cut both
				// sides: the write lands, its answer is lost.
				time.Sleep(100 * time.Millisecond)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pumpDown forwards server -> client, delayed by the current latency.
func (p *Proxy) pumpDown(l *link) {
	defer p.wg.Done()
	defer p.drop(l)
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d, replace := p.latency, p.replace
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			out := buf[:n]
			if replace[0] != nil {
				out = bytes.ReplaceAll(out, replace[0], replace[1])
			}
			if !l.muted.Load() {
				if _, werr := l.client.Write(out); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// shouldCut reports whether chunk is a request to cut, and whether to send
// it first.
func (p *Proxy) shouldCut(chunk []byte) (cut, send bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutLeft <= 0 || len(p.cut) == 0 {
		return false, false
	}
	for _, pat := range p.cut {
		if !bytes.Contains(chunk, pat) {
			return false, false
		}
	}
	p.cutLeft--
	p.cuts.Add(1) // counted when matched: a reply lost after the call lands may be lost after its effects are seen
	return true, p.cutSend
}

func (p *Proxy) drop(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

func (l *link) close() {
	l.once.Do(func() {
		reset(l.client)
		reset(l.server)
	})
}

// reset closes c with an RST rather than a FIN, as a crashed peer or a
// middlebox dropping state would.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// ResetAll resets every open connection and returns how many there were.
// New connections are accepted as usual.
func (p *Proxy) ResetAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	p.resets.Add(int64(len(links)))
	return len(links)
}

// SetDown starts (true) or ends (false) an outage: every open connection
// is reset and new ones are refused until it ends.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.ResetAll()
	}
}

// RewriteReplies replaces from with to in every reply from now on, as a
// proxy or another server that words a reply differently would (only
// within one read from the server: keep from short). A nil from stops it.
func (p *Proxy) RewriteReplies(from, to []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replace = [2][]byte{from, to}
}

// SetLatency delays every chunk of replies by d (0 for none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// CutAfter makes the next n requests whose bytes contain pattern reach the
// server, then cuts their connection before the reply reaches the client:
// the write lands, its answer is lost. A nil pattern stops cutting.
func (p *Proxy) CutAfter(pattern []byte, n int) { p.setCut(one(pattern), n, true) }

// CutBefore resets the connection of the next n requests whose bytes
// contain pattern instead of sending them: the write never lands.
func (p *Proxy) CutBefore(pattern []byte, n int) { p.setCut(one(pattern), n, false) }

// CutAfterAll is CutAfter for the next n requests whose bytes contain every
// one of patterns (a script's hash and one of its keys, say: that script's
// call about that key only). No pattern stops cutting.
func (p *Proxy) CutAfterAll(n int, patterns ...[]byte) { p.setCut(patterns, n, true) }

// CutBeforeAll is CutBefore for the next n requests whose bytes contain
// every one of patterns.
func (p *Proxy) CutBeforeAll(n int, patterns ...[]byte) { p.setCut(patterns, n, false) }

func one(pattern []byte) [][]byte {
	if len(pattern) == 0 {
		return nil
	}
	return [][]byte{pattern}
}

func (p *Proxy) setCut(patterns [][]byte, n int, send bool) {
	cut := make([][]byte, 0, len(patterns))
	for _, pat := range patterns {
		if len(pat) > 0 {
			cut = append(cut, bytes.Clone(pat))
		}
	}
	p.mu.Lock()
	p.cut, p.cutLeft, p.cutSend = cut, n, send
	p.mu.Unlock()
}

// Close stops the proxy, resets every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
