package dashboard

import "embed"

// Files are the dashboard's files, by name (index.html, style.css,
// chart.css, chart-base.js, chart.js, history.js, app.js).
//
//go:embed index.html style.css chart.css chart-base.js chart.js history.js app.js
var Files embed.FS

// Chart returns the chart code (chart-base.js, then chart.js) and its
// style sheet, for a page of its own (the replay report).
func Chart() (js, css []byte) {
	for _, name := range []string{"chart-base.js", "chart.js"} {
		b, err := Files.ReadFile(name)
		if err != nil {
			panic("dashboard: " + name + " is not embedded: " + err.Error()) // programmer error: the embed list
		}
		js = append(append(js, b...), '\n')
	}
	css, err := Files.ReadFile("chart.css")
	if err != nil {
		panic("dashboard: chart.css is not embedded: " + err.Error())
	}
	return js, css
}
