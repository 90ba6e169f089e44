// Command soak is a bounded load test of a running degraded binary: many
// SSE subscribers, a steady stream of outcome reports and an override flip
// every two seconds. At the end it checks that every subscriber holds the
// final sequence, that the daemon's goroutines return to their baseline once
// the subscribers leave, and that its memory stayed bounded, and prints the
// figures. Run it through run.sh, which builds the daemon and raises the
// file limit; it talks only to 127.0.0.1 and stops on its own.
package main
