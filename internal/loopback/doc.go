// Package loopback gives tests loopback addresses for servers they stop
// and start again on the same port (etcd members, a proxy), where
// 127.0.0.1:0 is not safe: it picks a port in the kernel's ephemeral
// range, which any outgoing connection of a test running beside it may
// take while the server is down.
package loopback
