package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/degraded/degraded/config"
	"github.com/degraded/degraded/internal/daemon"
	"github.com/degraded/degraded/levels"
	"github.com/spf13/cobra"
)

func serveCmd(environ []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon",
		Args:  cobra.NoArgs,
	}
	path := cmd.Flags().String("config", "", "YAML config file (default: the embedded defaults)")
	cmd.Flags().String("listen", "", "address to listen on (overrides the config's listen)")
	reset := cmd.Flags().Bool("reset-state", false, "move an unusable state file aside and start at Normal")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		load := func(reload bool) (*config.Config, []string, error) {
			return config.Load(config.LoadOptions{Path: *path, Environ: environ, Flags: cmd.Flags(), Reload: reload})
		}
		return serve(cmd.Context(), load, *reset, stdout, stderr)
	}
	return cmd
}

// serve loads the config, listens, and runs the daemon until ctx ends,
// re-reading the config on SIGHUP.
func serve(ctx context.Context, load daemon.Loader, resetState bool, stdout, stderr io.Writer) error {
	cfg, warnings, err := load(false)
	if err != nil {
		return configError(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	d, err := daemon.New(cfg, daemon.Options{Load: load, Listener: ln, ResetState: resetState, Log: stderr})
	if err != nil {
		ln.Close()
		return err
	}
	defer d.Close()
	log := d.Logger()
	for _, w := range warnings {
		log.Warn("config: " + w)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()

	scheme := "http"
	if cfg.TLS.Enabled() {
		scheme = "https"
	}
	log.Info("degraded serving", "addr", scheme+"://"+d.Addr().String(), "levels", len(cfg.Levels)+1, "data_dir", cfg.DataDir, "go", runtime.Version())
	fmt.Fprint(stdout, startLine(scheme+"://"+d.Addr().String(), runtime.Version()))
	if note := olderGo(runtime.Version()); note != "" {
		log.Warn(note)
	}
	for {
		select {
		case err := <-done:
			return err
		case <-hup:
			if err := d.Reload(levels.ActorSignal); err != nil {
				log.Error("reload refused, keeping the old config", "err", err)
			}
		}
	}
}

// startLine is serve's first line on stdout: the address it serves, and,
// when the binary was built with a Go older than go.mod's toolchain line,
// that too.
func startLine(url, goVersion string) string {
	if note := olderGo(goVersion); note != "" {
		return fmt.Sprintf("degraded listening on %s (%s)\n", url, note)
	}
	return fmt.Sprintf("degraded listening on %s\n", url)
}
