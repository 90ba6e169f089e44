package main

import (
	"fmt"
	"go/version"
	"runtime/debug"
	"strings"
)

// toolchain is go.mod's toolchain line: the oldest Go that production
// builds should use (go1.26.8 and older have standard-library
// vulnerabilities that govulncheck finds reachable). A binary cannot read
// go.mod, so the line is copied here; TestToolchainMatchesGoMod keeps the
// two equal.
const toolchain = "go1.26.10"

// olderGo says, when goVersion (runtime.Version() or BuildInfo.GoVersion,
// such as "go1.26.8") is older than toolchain, that the binary was built
// with an older Go and how to rebuild it; otherwise, and for versions it
// cannot compare (a development build), "". A Go whose GOTOOLCHAIN is
// local ignores the toolchain line, which is how such a binary is made.
func olderGo(goVersion string) string {
	v, _, _ := strings.Cut(goVersion, " ") // "go1.26.8 X:boringcrypto"
	if !version.IsValid(v) || version.Compare(v, toolchain) >= 0 {
		return ""
	}
	return fmt.Sprintf("built with %s, older than go.mod's toolchain %s: rebuild with GOTOOLCHAIN=%s", v, toolchain, toolchain)
}

// versionText is what `degraded version` prints, from the binary's build
// information: the module version, the VCS revision (with its time and
// "modified" when the tree was dirty), or "revision unknown" when the
// binary carries none (built with -buildvcs=false, or outside a checkout),
// and the Go toolchain, with a warning when it is older than go.mod's
// toolchain line.
func versionText(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "degraded (unknown version): no build information in this binary\nrevision unknown\n"
	}
	modVersion := bi.Main.Version
	if modVersion == "" {
		modVersion = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "degraded %s\n", modVersion)
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
		if note := olderGo(bi.GoVersion); note != "" {
			fmt.Fprintf(&b, "warning: %s\n", note)
		}
	}
	return b.String()
}
