package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// versionText is what `degraded version` prints, from the binary's build
// information: the module version, the VCS revision (with its time and
// "modified" when the tree was dirty), or "revision unknown" when the
// binary carries none (built with -buildvcs=false, or outside a checkout),
// and the Go toolchain.
func versionText(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "degraded (unknown version): no build information in this binary\nrevision unknown\n"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "degraded %s\n", version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		var notes []string
		if t := settings["vcs.time"]; t != "" {
			notes = append(notes, "committed "+t)
		}
		if settings["vcs.modified"] == "true" {
			notes = append(notes, "modified")
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("revision unknown (built without VCS information: build in a git checkout with -buildvcs=true)\n")
	}
	if bi.GoVersion != "" {
		fmt.Fprintf(&b, "built with %s\n", bi.GoVersion)
	}
	return b.String()
}
