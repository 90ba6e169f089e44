// Package degradedgrpc sheds gRPC calls at the degraded daemon's level, as
// client.Middleware sheds HTTP requests, and carries a call's priority to
// the services it calls.
//
// On a server, UnaryServerInterceptor and StreamServerInterceptor admit a
// call as client.Client.Admit decides (the level's threshold, the partial
// band's draw, shadow mode, the fail mode), answer a call that is not
// admitted with codes.ResourceExhausted and the trailers
// grpc-retry-pushback-ms and x-degraded-level, record the outcome of every
// admitted call by its code (never a shed one), and put the call's
// priority in its context (client.WithPriority). On a client,
// UnaryClientInterceptor and StreamClientInterceptor send that priority on
// as x-priority metadata, so that a checkout call stays a checkout call
// three services down.
//
//	c, _ := client.New(addr, client.WithToken(reportToken))
//	go c.Run(ctx)
//	prio := degradedgrpc.PriorityFromMetadata("x-priority", 50)
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(degradedgrpc.UnaryServerInterceptor(c, prio)),
//		grpc.ChainStreamInterceptor(degradedgrpc.StreamServerInterceptor(c, prio)))
//	conn, _ := grpc.NewClient(next,
//		grpc.WithChainUnaryInterceptor(degradedgrpc.UnaryClientInterceptor()),
//		grpc.WithChainStreamInterceptor(degradedgrpc.StreamClientInterceptor()))
//
// It is a module of its own, so that the client stays standard-library
// only: it requires the client and google.golang.org/grpc, nothing else.
// It does not retry calls (a shed call must not be retried at once; see
// docs/client.md for grpc-go's retry policy and pushback) and it does not
// decide levels.
package degradedgrpc
