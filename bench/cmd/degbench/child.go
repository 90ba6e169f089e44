package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"time"
)

// child is a degbench subprocess driven over its stdin and stdout (the
// fan-out floor, the subscribers, the overload service): it ends when its
// stdin closes, and its stderr is degbench's.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startChild starts cmd with pipes to its stdin and from its stdout.
func startChild(cmd *exec.Cmd) (child, error) {
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return child{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return child{}, err
	}
	if err := cmd.Start(); err != nil {
		return child{}, err
	}
	return child{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// stop closes the child's stdin and waits for it to exit, killing it
// after 10 s.
func (c child) stop() {
	c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
