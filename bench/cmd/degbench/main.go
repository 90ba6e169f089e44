// Command degbench runs the system-level measurements of bench/run.sh
// against a real degraded binary on loopback, and writes the report:
//
//	degbench fanout   -binary B -redis-server R  10,000 SSE vs Redis pub/sub subscribers vs a bare floor
//	degbench scale    -binary B -sizes 1000,10000,19800  SSE subscribers up to the file limit
//	degbench http     -binary B -wrk W           wrk on the daemon vs a bare net/http server
//	degbench reaction -binary B                  failing outcomes posted -> SSE level event
//	degbench idle     -binary B                  CPU and RSS with 100 subscribers, default config
//	degbench fleet    -binary B -daemons 50      a fleet override through etcd -> every daemon's SSE event
//	degbench fleet-scale -sizes 100,300,1000     1,000 members of the fleet package in one process on one etcd
//	degbench overload -binary B [-quick]         a fixed-capacity service under overload, each system in front
//	degbench report   -results DIR -out FILE     docs/performance.md from the results
//
// and, to find the causes of a missed target (not run by run.sh):
//
//	degbench profile-fanout [-proto] [-memory-state]  heap and CPU profiles of the SSE fan-out
//	degbench profile-http -endpoint "POST /v1/outcomes" CPU profile under wrk
//	degbench overload-compare -a A -b B [-n 6] [-scenarios cpu3x]  two daemon binaries, n runs each in turn
//
// Each measurement writes one JSON file; every load it makes is bounded
// in count and time and goes to 127.0.0.1 only.
package main

import (
	"fmt"
	"os"
)

func main() {
	cmds := map[string]func([]string) error{
		"fanout":           fanoutCmd,
		"scale":            scaleCmd,
		"http":             httpCmd,
		"bare":             bareCmd,
		"subscribers":      subscribersCmd,
		"profile-fanout":   profileFanoutCmd,
		"profile-http":     profileHTTPCmd,
		"reaction":         reactionCmd,
		"idle":             idleCmd,
		"fleet":            fleetCmd,
		"fleet-scale":      fleetScaleCmd,
		"overload":         overloadCmd,
		"overload-compare": overloadCompareCmd,
		"floor":            floorCmd,
		"overload-service": overloadServiceCmd,
		"report":           reportCmd,
	}
	if len(os.Args) < 2 || cmds[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: degbench fanout|scale|http|reaction|idle|fleet|fleet-scale|overload|report [flags]")
		os.Exit(2)
	}
	if err := cmds[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "degbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
