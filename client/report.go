package client

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// maxRetained bounds the counts kept across failed flushes: the daemon
// accepts at most this many of each per report. Beyond it the oldest
// counts are scaled down, keeping the failure ratio.
const maxRetained = 1_000_000_000

// counts are outcomes taken from the counters but not yet accepted.
type counts struct{ success, failure int64 }

// Record counts the outcome of one unit of work towards the daemon's error
// rate. It is two atomic adds at most: it never blocks, allocates or does
// I/O, whether or not the daemon is up. Run flushes the counts every
// report interval. Do not record requests that were shed.
func (c *Client) Record(success bool) {
	if success {
		c.success.Add(1)
	} else {
		c.failure.Add(1)
	}
}

// flush sends what was recorded since the last accepted flush. On a
// failure the counts are kept, bounded, for the next flush; an answer the
// daemon will never accept (4xx other than 408 and 429) drops them and is
// logged, rate-limited. Only
// one flush runs at a time: the reporter loop, then Run's final flush.
func (c *Client) flush(ctx context.Context) error {
	p := &c.pending
	p.success += c.success.Swap(0)
	p.failure += c.failure.Swap(0)
	if p.success == 0 && p.failure == 0 {
		return nil
	}
	if total := p.success + p.failure; total > maxRetained {
		scale := float64(maxRetained) / float64(total)
		p.success = int64(float64(p.success) * scale)
		p.failure = int64(float64(p.failure) * scale)
	}
	_, err := c.Report(ctx, p.success, p.failure)
	var ae *APIError
	if err == nil || errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 &&
		ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusTooManyRequests {
		if ae != nil {
			c.refused(ae, p.success, p.failure, time.Now())
		}
		*p = counts{}
	}
	return err
}
