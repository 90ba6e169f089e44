package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/degraded/degraded/controller/controllertest"
	"github.com/degraded/degraded/levels"
)

func TestDashboardPage(t *testing.T) {
	r := newRig(t, Deps{})
	w := r.do("GET", "/", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /: %d, want 200", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q, want text/html; charset=utf-8", ct)
	}
	page := w.Body.String()
	for _, want := range []string{"<style>", "<script>", `id="level-name"`, `id="override-form"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, tag := range []string{styleTag("style.css"), styleTag("chart.css"), scriptTag("chart-base.js"), scriptTag("chart.js"), scriptTag("history.js"), scriptTag("app.js")} {
		if strings.Contains(page, tag) {
			t.Errorf("page still has %s instead of inlining it", tag)
		}
	}
	if n := strings.Count(page, "<script>"); n != 4 {
		t.Errorf("page has %d inline scripts, want 4 (chart-base.js, chart.js, history.js, app.js)", n)
	}

	t.Run("nothing loaded from elsewhere", func(t *testing.T) {
		// The only absolute URL is the SVG namespace, which is a name, not a fetch.
		abs := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|fetch\(\s*["'](https?:)?//|https?://`)
		for _, m := range abs.FindAllString(strings.ReplaceAll(page, "http://www.w3.org/2000/svg", ""), -1) {
			t.Errorf("page refers to another origin: %q", m)
		}
	})

	t.Run("the policy allows exactly the inline scripts and styles", func(t *testing.T) {
		csp := w.Header().Get("Content-Security-Policy")
		for _, tag := range []string{"script", "style"} {
			bodies := blocks(page, "<"+tag+">", "</"+tag+">")
			var hashes []string
			for _, body := range bodies {
				sum := sha256.Sum256([]byte(body))
				hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
			}
			if want := tag + "-src " + strings.Join(hashes, " ") + ";"; len(bodies) == 0 || !strings.Contains(csp, want) {
				t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
			}
		}
		for _, want := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
			}
		}
	})

	t.Run("every element the scripts look up exists", func(t *testing.T) {
		js := strings.Join(blocks(page, "<script>", "</script>"), "\n")
		for _, m := range regexp.MustCompile(`\$\('([A-Za-z0-9_-]+)'\)`).FindAllStringSubmatch(js, -1) {
			if !strings.Contains(page, `id="`+m[1]+`"`) {
				t.Errorf("app.js looks up #%s, which index.html lacks", m[1])
			}
		}
	})

	t.Run("every form control has a label", func(t *testing.T) {
		for _, m := range regexp.MustCompile(`<(?:input|select)[^>]*\bid="([^"]+)"`).FindAllStringSubmatch(page, -1) {
			if !strings.Contains(page, `for="`+m[1]+`"`) {
				t.Errorf("control #%s has no <label for>", m[1])
			}
		}
	})

	t.Run("revalidation", func(t *testing.T) {
		tag := w.Header().Get("ETag")
		if tag == "" {
			t.Fatal("no ETag")
		}
		if w := r.do("GET", "/", "", "If-None-Match", tag); w.Code != http.StatusNotModified {
			t.Errorf("If-None-Match %s: %d, want 304", tag, w.Code)
		}
	})

	t.Run("read only", func(t *testing.T) {
		if w := r.do("POST", "/", `{}`); w.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST /: %d, want 405", w.Code)
		}
	})
}

// blocks are the bodies of every open...closing element of s, in order.
func blocks(s, open, closing string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(s, open)
		if !ok {
			return out
		}
		body, after, ok := strings.Cut(rest, closing)
		if !ok {
			return out
		}
		out = append(out, body)
		s = after
	}
}

func TestSamples(t *testing.T) {
	r := newIdleRigEvery(t, Deps{}, 30*time.Second) // keeps 20 samples; the test takes no 30s
	got := decodeBody[map[string][]levels.Sample](t, r.do("GET", "/v1/samples", ""))
	if s, ok := got["samples"]; !ok || s == nil || len(s) != 0 {
		t.Fatalf("before any health check: %v, want {\"samples\":[]}", got)
	}
	if w := r.do("GET", "/v1/samples", ""); strings.TrimSpace(w.Body.String()) != `{"samples":[]}` {
		t.Errorf("empty body %q, want {\"samples\":[]}", w.Body)
	}

	r.win.Record(time.Now(), 990, 10)
	controllertest.Run(t, r.c)      // 1% errors: the first health check
	r.fail(t, 0, 60)                // 70 failures of 1060: a second
	r.c.Check(context.Background()) // and a third
	w := r.do("GET", "/v1/samples", "")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/samples: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	samples := decodeBody[map[string][]levels.Sample](t, w)["samples"]
	if len(samples) != 3 {
		t.Fatalf("%d samples, want 3 (one per health check)", len(samples))
	}
	for i, s := range samples {
		if s.SampledAt.IsZero() {
			t.Fatalf("sample %d has no sampled_at", i)
		}
		if i > 0 && s.SampledAt.Before(samples[i-1].SampledAt) {
			t.Errorf("sample %d at %v is before sample %d at %v: want oldest first", i, s.SampledAt, i-1, samples[i-1].SampledAt)
		}
	}
	if a := samples[0].WindowAttempts; a != 1000 {
		t.Errorf("first sample counts %d attempts, want 1000", a)
	}
	if a, f := samples[2].WindowAttempts, samples[2].WindowFailures; a != 1060 || f != 70 {
		t.Errorf("last sample counts %d/%d, want 1060 attempts, 70 failures", a, f)
	}
}
