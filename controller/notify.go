package controller

import "sync"

// notifier is a broadcast "something changed" signal. Waiters take the
// current channel, then read the latest value; Broadcast closes the channel
// and replaces it, so a slow waiter skips intermediate values instead of
// queueing them. The zero value is ready to use.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed by the next broadcast.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// broadcast wakes every current waiter.
func (n *notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
