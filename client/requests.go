package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// requestTimeout bounds every request but the stream and the long-poll.
const requestTimeout = 10 * time.Second

// newRequest builds a request to path with the token set.
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// send performs req and decodes a 2xx JSON answer into out (if not nil).
// A transport failure names the daemon's address; a non-2xx answer is an
// *APIError.
func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && ctxErr == context.Canceled {
			return ctxErr
		}
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(body).Decode(&e) != nil || e.Error == "" {
			e.Error = http.StatusText(resp.StatusCode)
		}
		return &APIError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, body)
		return nil
	}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// unreachable names the daemon's address in a transport failure, without
// the request URL that *url.Error would repeat.
func (c *Client) unreachable(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("cannot reach degraded at %s: %w", c.base, err)
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, method, path, in)
	if err != nil {
		return err
	}
	return c.send(req, out)
}

// Fetch asks the daemon for its current state (GET /v1/level). It does not
// change what Allow and State answer; Run does that.
func (c *Client) Fetch(ctx context.Context) (State, error) {
	var st State
	err := c.call(ctx, http.MethodGet, "/v1/level", nil, &st)
	return st, err
}

// GetJSON decodes the JSON answer of GET path (e.g. "/v1/history?limit=5")
// into out, with the token set: for documents and fields this package
// does not model, such as fields added by a newer daemon. A non-2xx answer
// is an *APIError.
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	return c.call(ctx, http.MethodGet, path, nil, out)
}

// Levels returns the daemon's level table, Normal first (GET /v1/levels).
func (c *Client) Levels(ctx context.Context) ([]Level, error) {
	var b struct {
		Levels []Level `json:"levels"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/levels", nil, &b)
	return b.Levels, err
}

// OverrideRequest is an operator's request to pin or floor the level.
type OverrideRequest struct {
	// Level is the name of the level to pin or floor to.
	Level string
	// Floor makes the override a floor (max of the automatic level and
	// Level) instead of a pin (exactly Level).
	Floor bool
	// TTL is how long the override lasts, 1s up to the daemon's
	// max_override_ttl.
	TTL time.Duration
	// Reason is recorded in the history, e.g. "INC-42: failover".
	Reason string
}

// SetOverride pins or floors the level (PUT /v1/override; needs the admin
// token) and returns the resulting state.
func (c *Client) SetOverride(ctx context.Context, r OverrideRequest) (State, error) {
	var st State
	err := c.call(ctx, http.MethodPut, "/v1/override", r.body(), &st)
	return st, err
}

// body is the JSON body of PUT /v1/override and PUT /v1/fleet/override.
func (r OverrideRequest) body() map[string]string {
	mode := "pin"
	if r.Floor {
		mode = "floor"
	}
	return map[string]string{"level": r.Level, "mode": mode, "ttl": r.TTL.String(), "reason": r.Reason}
}

// ClearOverride ends the active override, if any (DELETE /v1/override;
// needs the admin token), and returns the resulting state.
func (c *Client) ClearOverride(ctx context.Context) (State, error) {
	var st State
	err := c.call(ctx, http.MethodDelete, "/v1/override", nil, &st)
	return st, err
}

// Report adds outcome counts to the daemon's error window at once (POST
// /v1/outcomes) and returns how many it accepted. Services should prefer
// Record, which batches; Report is for tools and tests.
func (c *Client) Report(ctx context.Context, success, failure int64) (int64, error) {
	var b struct {
		Accepted int64 `json:"accepted"`
	}
	err := c.call(ctx, http.MethodPost, "/v1/outcomes", outcomeReport{Success: success, Failure: failure}, &b)
	return b.Accepted, err
}
