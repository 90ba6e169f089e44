package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Run runs the health loop and the API's event streams and, with
// Options.Listener, serves the API on it, until ctx ends or serving fails.
// It then ends the event streams and long-polls, stops accepting, waits up
// to 10s for requests in flight, and saves the state one last time. It
// returns once every goroutine it started has ended: nil after a clean
// stop, an error naming the cause if serving failed or the final save did
// (the next start then resumes from the last saved state).
func (d *Daemon) Run(ctx context.Context) error {
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	d.runner.start(runCtx)
	defer d.runner.stop()
	// The recorder starts before the controller and stops after it, so
	// that it writes every line the controller records.
	recCtx, stopRec := context.WithCancel(context.Background())
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		if d.recorder != nil {
			_ = d.recorder.Run(recCtx) // returns recCtx.Err() once it has written the queue
		}
	}()
	fleetDone := d.startFleet(runCtx)
	ctrlDone := make(chan error, 1)
	go func() { ctrlDone <- d.ctrl.Run(runCtx) }()
	// The API stops first: its streams read the state to the end.
	apiCtx, stopAPI := context.WithCancel(context.Background())
	defer stopAPI()
	apiDone := make(chan struct{})
	go func() {
		defer close(apiDone)
		_ = d.api.Run(apiCtx) // returns apiCtx.Err() once its streams are closed
	}()

	base, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	var srv *http.Server
	srvDone := make(chan error, 1)
	if d.ln != nil {
		srv = &http.Server{
			Handler:           d.api.Handler(),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      90 * time.Second, // above the 60s long-poll cap; SSE sets its own deadlines
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			BaseContext:       func(net.Listener) context.Context { return base },
			ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		}
		go func() { srvDone <- srv.Serve(d.ln) }()
	}

	var serveErr error
	served := false // serveErr holds Serve's result
	select {
	case <-ctx.Done():
	case serveErr = <-srvDone:
		served = true
	}
	d.log.Info("shutting down")
	stopAPI() // ends the event streams and long-polls, counted as such
	<-apiDone // before the requests' contexts end: a stream ended so is counted as a shutdown
	endStreams()
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			d.log.Warn("shutdown", "err", err)
		}
		if !served {
			serveErr = <-srvDone // http.ErrServerClosed, at once after Shutdown
		}
	}
	stopRun()
	<-fleetDone
	ctrlErr := <-ctrlDone
	stopRec()
	<-recDone
	if err := ctrlErr; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("state not saved at shutdown; the next start will resume from the last saved state: %w", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}
