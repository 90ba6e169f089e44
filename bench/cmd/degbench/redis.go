package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server started for the fan-out comparison: on
// loopback, a free port, no persistence, room for the subscribers.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
}

func startRedis(binary string, maxClients int) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--maxclients", strconv.Itoa(maxClients), "--loglevel", "warning",
		"--dir", os.TempDir())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	r := &redisServer{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, errors.New("redis-server did not answer PING within 10s")
		}
	}
}

func (r *redisServer) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

func (r *redisServer) pid() int { return r.cmd.Process.Pid }

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n distinct free loopback ports: each is held open
// until all are chosen (closed one by one, the kernel may hand the same
// port out twice, as it did to fleet-scale's etcd).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
