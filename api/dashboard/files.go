package dashboard

import "embed"

// Files are the dashboard's files, by name (index.html, style.css,
// chart.css, chart.js, history.js, app.js).
//
//go:embed index.html style.css chart.css chart.js history.js app.js
var Files embed.FS

// Chart returns the chart code and its style sheet, for a page of its own
// (the replay report).
func Chart() (js, css []byte) {
	js, err := Files.ReadFile("chart.js")
	if err != nil {
		panic("dashboard: chart.js is not embedded: " + err.Error()) // programmer error: the embed list
	}
	css, err = Files.ReadFile("chart.css")
	if err != nil {
		panic("dashboard: chart.css is not embedded: " + err.Error())
	}
	return js, css
}
