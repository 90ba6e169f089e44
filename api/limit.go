package api

import (
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// reservedFiles are the descriptors max_connections: 0 leaves to the
// daemon's own files: samplers, the state file, logs.
const reservedFiles = 64

// reservedForShort are the connections streams and long-polls never take,
// so that override, health and metrics requests always find a slot.
const reservedForShort = 32

// ConnectionLimit is the connection cap for a configured max_connections:
// the configured value, or the soft RLIMIT_NOFILE minus 64 when it is 0.
// It fails when the limit leaves fewer than 64 connections, naming it.
func ConnectionLimit(configured int) (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("max_connections: read RLIMIT_NOFILE: %w", err)
	}
	return connectionLimit(configured, rl.Cur)
}

// connectionLimit is ConnectionLimit with the soft file limit given.
func connectionLimit(configured int, nofile uint64) (int, error) {
	switch {
	case configured < 0:
		return 0, fmt.Errorf("max_connections: must be >= 0, 0 meaning RLIMIT_NOFILE - %d (was %d)", reservedFiles, configured)
	case configured > 0 && uint64(configured)+reservedFiles > nofile:
		// Connections past the file limit less the daemon's own files
		// take the files the state save and the samplers need: a flood of
		// 80 idle connections under max_connections 64 and a limit of 64
		// failed an override's save with EMFILE.
		return 0, fmt.Errorf("max_connections: %d connections and the daemon's own %d files need RLIMIT_NOFILE of at least %d, but it is %d; raise it (ulimit -n, LimitNOFILE=) or lower max_connections", configured, reservedFiles, configured+reservedFiles, nofile)
	case configured > 0:
		return configured, nil
	}
	n := int(min(nofile, math.MaxInt32)) - reservedFiles
	if n < reservedFiles {
		return 0, fmt.Errorf("max_connections: 0 means RLIMIT_NOFILE - %d, but RLIMIT_NOFILE is %d, leaving %d connections; raise it (ulimit -n, LimitNOFILE=) to at least %d or set max_connections", reservedFiles, nofile, n, 2*reservedFiles)
	}
	return n, nil
}

// StreamLimit is the cap on SSE streams and long-polls together for a
// connection cap: maxConnections - 32, at least 1, so that short requests
// always find a connection. It is the value for Deps.MaxStreams.
func StreamLimit(maxConnections int) int {
	return max(1, maxConnections-reservedForShort)
}

// LimitListener returns a listener that holds at most max connections
// open: one accepted beyond that is closed at once and onReject (if not
// nil) is called. Accept never blocks on the limit, and closing a
// connection frees its slot. Wrap the TCP listener, below any TLS.
func LimitListener(ln net.Listener, max int, onReject func()) net.Listener {
	return &limitListener{Listener: ln, max: int64(max), onReject: onReject}
}

type limitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	onReject func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		// Counted before the close, so that whoever sees the connection
		// closed also sees it counted.
		if l.onReject != nil {
			l.onReject()
		}
		c.Close()
	}
}

// limitConn frees its listener's slot once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
