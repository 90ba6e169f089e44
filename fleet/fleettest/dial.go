package fleettest

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Cutter is a fleet member's dialer (fleet.Options.Dial) that can cut the
// member off from etcd, as a crash or a partition would: Cut closes every
// connection it made and refuses new ones. The zero value dials.
type Cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	off   bool
}

// Dial dials addr over TCP unless the Cutter has been cut.
func (c *Cutter) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c.mu.Lock()
	off := c.off
	c.mu.Unlock()
	if off {
		return nil, errors.New("cut off")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off { // cut while dialing
		conn.Close()
		return nil, errors.New("cut off")
	}
	c.conns = append(c.conns, conn)
	return conn, nil
}

// Cut closes every connection the Cutter made and refuses new ones.
func (c *Cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}
