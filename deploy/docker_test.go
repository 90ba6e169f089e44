package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction: its keyword, its flags
// (--from=build, --mount=...) and the rest of the line.
type instruction struct {
	line  int
	op    string
	flags map[string]string
	args  string
}

// parseDockerfile reads a Dockerfile's instructions: comments dropped,
// backslash continuations joined.
func parseDockerfile(t *testing.T, text string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasPrefix(line, "#") { // a comment inside a continued instruction
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		op, rest, _ := strings.Cut(cur.String(), " ")
		ins := instruction{line: start, op: strings.ToUpper(op), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			flag, after, _ := strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			if ins.flags[k] != "" {
				v = ins.flags[k] + ";" + v
			}
			ins.flags[k] = v
			rest = strings.TrimSpace(after)
		}
		ins.args = rest
		out = append(out, ins)
		cur.Reset()
	}
	return out
}

// dockerignore reads the ignore patterns BuildKit uses for this
// Dockerfile: <Dockerfile>.dockerignore beside it, else the context's
// .dockerignore.
func dockerignore(t *testing.T, dockerfile, context string) []string {
	t.Helper()
	b, err := os.ReadFile(dockerfile + ".dockerignore")
	if os.IsNotExist(err) {
		b, err = os.ReadFile(filepath.Join(context, ".dockerignore"))
	}
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, strings.TrimSuffix(path.Clean(l), "/"))
		}
	}
	return pats
}

// ignored reports whether a context path (slash-separated, relative) is
// left out of the build context: a pattern matches it or a parent of it,
// as Docker's filepath.Match rules have it.
func ignored(pats []string, rel string) bool {
	for _, p := range pats {
		for dir := rel; dir != "." && dir != "/"; dir = path.Dir(dir) {
			if ok, _ := path.Match(p, dir); ok {
				return true
			}
		}
	}
	return false
}

// copyTree copies src (a file or a directory of the context) to dst,
// leaving out what the ignore patterns name.
func copyTree(t *testing.T, context string, pats []string, src, dst string) {
	t.Helper()
	root := filepath.Join(context, filepath.FromSlash(src))
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
	if !fi.IsDir() {
		if strings.HasSuffix(dst, "/") {
			dst = filepath.Join(dst, filepath.Base(root))
		}
		copyFile(t, root, dst)
		return
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(context, p)
		if rel != "." && ignored(pats, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		sub, _ := filepath.Rel(root, p)
		to := filepath.Join(dst, sub)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			copyFile(t, p, to)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// imageDirs are the top-level directories of the build image that are
// also this machine's; any other absolute path a build step names (/src,
// /out) is the image's own and lives under the replay's root.
var imageDirs = []string{"bin", "boot", "dev", "etc", "go", "home", "lib", "lib64", "proc", "root", "run", "sbin", "sys", "tmp", "usr", "var"}

var absPath = regexp.MustCompile(`(^|[\s=:"'])(/[A-Za-z0-9._/-]*)`)

// inRoot maps the image's own absolute paths in s under root.
func inRoot(root, s string) string {
	return absPath.ReplaceAllStringFunc(s, func(m string) string {
		sub := absPath.FindStringSubmatch(m)
		top, _, _ := strings.Cut(strings.TrimPrefix(sub[2], "/"), "/")
		if slices.Contains(imageDirs, top) {
			return m
		}
		return sub[1] + filepath.Join(root, sub[2])
	})
}

// TestDockerfileBuildSteps replays the Dockerfile's build stage as a
// script would, since this machine has no Docker engine: each COPY copies
// from the repository (what the .dockerignore leaves of it) into a clean
// directory, each RUN runs there with the stage's ENV, in order, and the
// test fails on the first step that fails. The later stages' COPY
// --from=build sources must then exist. Cache mounts are dropped (this
// machine's module and build caches stand in for them); the image's own
// directories (/src, /out) live under the temporary root.
func TestDockerfileBuildSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon")
	}
	dockerfile := filepath.Join("docker", "Dockerfile")
	context, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pats := dockerignore(t, dockerfile, context)
	steps := parseDockerfile(t, read(t, dockerfile))

	root := t.TempDir()
	args := map[string]string{}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string { return args[k] })
	}
	stage, built := "", map[string]string{} // stage name -> its root
	workdir := "/"
	env := os.Environ()
	ran := 0
	for _, s := range steps {
		where := fmt.Sprintf("Dockerfile:%d %s %s", s.line, s.op, s.args)
		switch s.op {
		case "ARG":
			k, v, _ := strings.Cut(s.args, "=")
			if _, ok := args[k]; !ok {
				args[k] = v
			}
		case "FROM":
			f := strings.Fields(expand(s.args))
			if stage != "" {
				built[stage] = root
			}
			stage = fmt.Sprintf("stage%d", len(built))
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stage = f[2]
			}
			root, workdir = t.TempDir(), "/"
		case "WORKDIR":
			workdir = path.Join(workdir, s.args)
			if err := os.MkdirAll(filepath.Join(root, workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "ENV":
			for _, kv := range strings.Fields(s.args) {
				if !strings.Contains(kv, "=") {
					t.Fatalf("%s: only the KEY=VALUE form is replayed", where)
				}
				env = append(env, kv)
			}
		case "COPY":
			f := strings.Fields(s.args)
			if len(f) < 2 || strings.HasPrefix(s.args, "[") {
				t.Fatalf("%s: only the shell form COPY SRC... DEST is replayed", where)
			}
			dest, slash := f[len(f)-1], ""
			if strings.HasSuffix(dest, "/") {
				slash = "/" // a directory: files keep their names in it
			}
			if !path.IsAbs(dest) {
				dest = path.Join(workdir, dest)
			}
			to := filepath.Join(root, dest) + slash
			for _, src := range f[:len(f)-1] {
				if from := s.flags["from"]; from != "" {
					froot, ok := built[from]
					if !ok {
						t.Fatalf("%s: no stage %q was built before", where, from)
					}
					if _, err := os.Stat(filepath.Join(froot, src)); err != nil {
						t.Fatalf("%s: stage %s did not make %s: %v", where, from, src, err)
					}
					continue // what the final image holds is not replayed
				}
				copyTree(t, context, pats, path.Clean(src), to)
			}
			ran++
		case "RUN":
			if strings.HasPrefix(s.args, "[") {
				t.Fatalf("%s: only the shell form of RUN is replayed", where)
			}
			if stage != "build" {
				t.Fatalf("%s: a RUN outside the build stage: the final image (distroless) has no shell", where)
			}
			cmd := exec.Command("sh", "-ec", inRoot(root, s.args))
			cmd.Dir = filepath.Join(root, workdir)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s\nfailed: %v\n%s", where, err, out)
			}
			t.Logf("%s\n%s", where, out)
			ran++
		}
	}
	if ran < 4 {
		t.Fatalf("replayed %d COPY and RUN steps; the Dockerfile should have its build stage's COPY and RUN steps", ran)
	}
	if _, err := os.Stat(filepath.Join(built["build"], "out", "degraded")); err != nil {
		t.Errorf("the build stage made no /out/degraded: %v", err)
	}
}
