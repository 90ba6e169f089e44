package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// rawConn is one keep-alive HTTP/1.1 connection to the daemon. A request
// is rendered before it is sent and written with one write, so that a
// trial's clock starts right before the POST's first byte leaves, with no
// client machinery between the two.
type rawConn struct {
	conn net.Conn
	br   *bufio.Reader
	host string
}

// dialRaw connects to host (host:port); the connection serves one trial,
// bounded in time as a whole.
func dialRaw(host string) (*rawConn, error) {
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	return &rawConn{conn: conn, br: bufio.NewReader(conn), host: host}, nil
}

// request renders a request with a JSON body (empty: none).
func (c *rawConn) request(method, path, body string) []byte {
	return fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, c.host, len(body), body)
}

func (c *rawConn) send(req []byte) error {
	_, err := c.conn.Write(req)
	return err
}

// answer reads the answer to the request sent last (what names it in
// errors) and checks its status.
func (c *rawConn) answer(what string, want int) ([]byte, error) {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s: %s, want %d: %s", what, resp.Status, want, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// do sends a request and reads its answer.
func (c *rawConn) do(method, path, body string, want int) ([]byte, error) {
	what := method + " " + path
	if err := c.send(c.request(method, path, body)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return c.answer(what, want)
}

func (c *rawConn) Close() error { return c.conn.Close() }
