package client

import "context"

// Operation is a unit of work with degraded alternatives, for Do.
type Operation[T any] struct {
	// Priority is the operation's priority, as for Allow.
	Priority int
	// Primary is the full-quality implementation.
	Primary func(ctx context.Context) (T, error)
	// Fallbacks maps a level name to a cheaper implementation that serves
	// from that level up, until a more severe level has its own, e.g.
	// {"Moderate": cached, "Severe": static}: cached at Moderate and
	// Major, static at Severe and above. May be nil.
	Fallbacks map[string]func(ctx context.Context) (T, error)
}

// Do runs op.Primary at Normal or when op.Priority is admitted (as Admit
// decides: the threshold and the partial band's draw). Otherwise
// it runs the fallback of the current level or, failing that, of the
// nearest less severe level that has one (a fallback keyed at Moderate
// serves from Moderate up, until a more severe level has its own); with
// none it returns ErrShed without running anything. Do records nothing:
// wrap the work in Record, or use Middleware, to report outcomes. The
// level order is learned by Run from GET /v1/levels; until it is known
// only the current level's own fallback is found. When the fail mode
// decides without any state, Do runs Primary if admitted and otherwise
// returns ErrShed. Its decision is counted for the admission report, as
// Admit counts it; in shadow mode Primary always runs and a would-shed is
// counted.
func Do[T any](ctx context.Context, c *Client, op Operation[T]) (T, error) {
	t := c.Admit(op.Priority)
	v := t.v
	if t.admitted {
		return op.Primary(ctx)
	}
	if f := fallbackFor(c, v, op.Fallbacks); f != nil {
		return f(ctx)
	}
	var zero T
	return zero, ErrShed
}

func fallbackFor[T any](c *Client, v *view, fallbacks map[string]func(context.Context) (T, error)) func(context.Context) (T, error) {
	if len(fallbacks) == 0 || v.index < 0 {
		return nil
	}
	if f, ok := fallbacks[v.level]; ok {
		return f
	}
	names := c.names.Load()
	if names == nil {
		return nil
	}
	if v.index >= len(*names) || (*names)[v.index] != v.level {
		return nil // the table changed since Run learned it
	}
	for i := v.index - 1; i >= 0; i-- {
		if f, ok := fallbacks[(*names)[i]]; ok {
			return f
		}
	}
	return nil
}
