package client

import (
	"context"
	"net/http"
	"net/url"
)

// PushSignal sends a value of a custom signal to the daemon
// (PUT /v1/signals/{name}); WithToken should carry the report token. An
// unknown name is an *APIError with status 404, a signal that a Prometheus
// query feeds one with 409.
func (c *Client) PushSignal(ctx context.Context, name string, value float64) error {
	return c.call(ctx, http.MethodPut, "/v1/signals/"+url.PathEscape(name), map[string]float64{"value": value}, nil)
}
