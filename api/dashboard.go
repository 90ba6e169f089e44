package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"net/http"

	"github.com/degraded/degraded/controller"
	"github.com/degraded/degraded/levels"
)

// dashboardFS holds the dashboard's static files. They are plain HTML, CSS
// and JavaScript with no build step and nothing loaded from elsewhere: the
// machines that run degraded often have no internet.
//
//go:embed dashboard/index.html dashboard/style.css dashboard/app.js
var dashboardFS embed.FS

// The tags in index.html that dashboardPage replaces with the files'
// contents. Kept as tags so the page also works opened from disk.
const (
	styleTag  = `<link rel="stylesheet" href="style.css">`
	scriptTag = `<script src="app.js"></script>`
)

// dashboard is the assembled page and the headers it is served with.
type dashboard struct {
	page []byte
	etag string
	csp  string
}

// dashboardPage builds the page once: index.html with style.css and app.js
// inlined, so that GET / is the only route the dashboard needs, and a
// Content-Security-Policy that allows exactly those two inline blocks (by
// hash) and requests to this origin.
func dashboardPage() *dashboard {
	read := func(name string) []byte {
		b, err := dashboardFS.ReadFile("dashboard/" + name)
		if err != nil {
			panic(fmt.Sprintf("api: embedded dashboard/%s: %v", name, err)) // programmer error: the embed list
		}
		return b
	}
	html, css, js := read("index.html"), read("style.css"), read("app.js")
	if bytes.Count(html, []byte(styleTag)) != 1 || bytes.Count(html, []byte(scriptTag)) != 1 {
		panic("api: dashboard/index.html must hold the style and script tags exactly once")
	}
	if bytes.Contains(bytes.ToLower(js), []byte("</script")) || bytes.Contains(bytes.ToLower(css), []byte("</style")) {
		panic("api: dashboard assets must not close their own element")
	}
	html = bytes.Replace(html, []byte(styleTag), concat("<style>", css, "</style>"), 1)
	html = bytes.Replace(html, []byte(scriptTag), concat("<script>", js, "</script>"), 1)

	sum := sha256.Sum256(html)
	return &dashboard{
		page: html,
		etag: fmt.Sprintf(`"%x"`, sum[:12]),
		csp: "default-src 'none'; " +
			"script-src " + cspHash(js) + "; " +
			"style-src " + cspHash(css) + "; " +
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
