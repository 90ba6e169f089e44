// Package dashboard holds the dashboard's static files: index.html, its
// style sheets and its scripts, plain files with no build step and
// nothing loaded from elsewhere. api serves them inlined into one page at
// GET /. chart-base.js, chart.js and chart.css, the History view's
// charts, are also what `degraded replay --format html` embeds in its
// report, so that both draw a timeline with the same code.
//
// It holds files only: no handler, no logic.
package dashboard
