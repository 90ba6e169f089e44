package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/degraded/degraded/api/dashboard"
	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// styleTag and scriptTag are the tags in index.html that dashboardPage
// replaces with the files' contents. Kept as tags so the page also works
// opened from disk.
func styleTag(name string) string  { return `<link rel="stylesheet" href="` + name + `">` }
func scriptTag(name string) string { return `<script src="` + name + `"></script>` }

// assembled is the dashboard's page and the headers it is served with.
type assembled struct {
	page []byte
	etag string
	csp  string
}

// dashboardPage builds the page once: index.html with its style sheets
// and scripts inlined, so that GET / is the only route the dashboard
// needs, and a Content-Security-Policy that allows exactly those inline
// blocks (by hash) and requests to this origin.
func dashboardPage() *assembled {
	// The style sheets and scripts of package dashboard (plain files with
	// no build step and nothing loaded from elsewhere: the machines that
	// run degraded often have no internet), in the order index.html names
	// them: chart-base.js and chart.js define what history.js and app.js use.
	dashboardStyles := []string{"style.css", "chart.css"}
	dashboardScripts := []string{"chart-base.js", "chart.js", "history.js", "app.js"}

	read := func(name string) []byte {
		b, err := dashboard.Files.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("api: embedded dashboard/%s: %v", name, err)) // programmer error: the embed list
		}
		return b
	}
	html := read("index.html")
	var scripts, styles []string
	inline := func(tag, open, closing, name string, hashes *[]string) {
		body := read(name)
		if bytes.Count(html, []byte(tag)) != 1 {
			panic("api: dashboard/index.html must hold " + tag + " exactly once")
		}
		if bytes.Contains(bytes.ToLower(body), []byte("</"+strings.Trim(open, "<>"))) {
			panic("api: dashboard/" + name + " must not close its own element")
		}
		html = bytes.Replace(html, []byte(tag), concat(open, body, closing), 1)
		*hashes = append(*hashes, cspHash(body))
	}
	for _, name := range dashboardStyles {
		inline(styleTag(name), "<style>", "</style>", name, &styles)
	}
	for _, name := range dashboardScripts {
		inline(scriptTag(name), "<script>", "</script>", name, &scripts)
	}

	sum := sha256.Sum256(html)
	return &assembled{
		page: html,
		etag: fmt.Sprintf(`"%x"`, sum[:12]),
		csp: "default-src 'none'; " +
			"script-src " + strings.Join(scripts, " ") + "; " +
			"style-src " + strings.Join(styles, " ") + "; " +
			"connect-src 'self'; img-src 'self' data:; " +
			"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	}
}

func concat(open string, body []byte, closing string) []byte {
	out := make([]byte, 0, len(open)+len(body)+len(closing))
	out = append(out, open...)
	out = append(out, body...)
	return append(out, closing...)
}

func cspHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// handleDashboard serves the live dashboard at GET /. The page reads the
// JSON API and the event stream from the same origin; it holds no state of
// its own beyond what the operator types.
func handleDashboard() http.HandlerFunc {
	d := dashboardPage()
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", d.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", d.etag)
		if matchesETag(r.Header.Get("If-None-Match"), d.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(d.page) // the client went away; nothing to do
	}
}

// samplesBody is the body of GET /v1/samples.
type samplesBody struct {
	Samples []levels.Sample `json:"samples"`
}

// handleSamples serves the signals of recent health checks, oldest first:
// the dashboard's sparklines. The controller bounds the ring (about ten
// minutes, at most controller.SamplesLimit entries).
func handleSamples(c *controller.Controller) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		s := c.Samples()
		if s == nil {
			s = []levels.Sample{}
		}
		w.Header().Set("Cache-Control", "no-cache")
		writeJSON(w, http.StatusOK, samplesBody{Samples: s})
	}
}
