package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// The overload report's plots: one SVG per scenario, a panel per system,
// hand-written (no network, no plotting library). Each panel shows, per
// second, the share of each class's arrivals the gate admitted, the
// judged phases shaded, and for degraded the published level (right axis)
// and, when the daemon publishes one, the partial admission's fraction.

const (
	svgWidth   = 760.0
	svgPanelH  = 150.0
	svgLeft    = 52.0 // room for the left axis
	svgRight   = 64.0 // room for the level axis
	svgTop     = 34.0 // room for the legend
	svgGap     = 34.0 // between panels: the panel's title
	svgPlotH   = svgPanelH - svgGap
	svgBottomX = 28.0 // room for the time axis
)

// classColors are the classes' line colours, top class first.
var classColors = []string{"#1b7837", "#2166ac", "#e08214", "#b2182b"}

// admittedShares is, per second and class, the share of the class's
// arrivals the gate admitted (served or failed by the service); NaN for a
// second without arrivals of the class.
func admittedShares(bins [][]classBin, binSeconds float64) [][]float64 {
	per := max(1, int(math.Round(1/binSeconds)))
	var out [][]float64
	for i := 0; i+per <= len(bins); i += per {
		row := make([]float64, len(overloadClasses))
		for c := range row {
			b := sumBins(bins, i, i+per, c)
			sent := b.Offered - b.CapHit
			row[c] = math.NaN()
			if sent > 0 {
				row[c] = float64(sent-b.Shed) / float64(sent)
			}
		}
		out = append(out, row)
	}
	return out
}

// writeOverloadSVG writes one scenario's figure; maxLevel is the table's
// most severe index (the level axis' top).
func writeOverloadSVG(w io.Writer, sc scenarioResult, binSeconds float64, maxLevelIndex int) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	total := sc.Seconds()
	height := svgTop + float64(len(sc.Runs))*svgPanelH + svgBottomX
	plotW := svgWidth - svgLeft - svgRight
	x := func(t float64) float64 { return svgLeft + plotW*min(max(t, 0), total)/total }

	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", svgWidth, height, svgWidth, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%.0f" y="14" font-size="13" font-weight="bold">%s</text>`+"\n", svgLeft, esc(sc.Name+": "+sc.Title))
	lx := svgLeft
	for c, cl := range overloadClasses {
		p(`<line x1="%.0f" y1="25" x2="%.0f" y2="25" stroke="%s" stroke-width="2"/><text x="%.0f" y="29">p%d admitted</text>`+"\n", lx, lx+16, classColors[c], lx+20, cl.Priority)
		lx += 100
	}
	p(`<line x1="%.0f" y1="25" x2="%.0f" y2="25" stroke="black" stroke-width="1.5"/><text x="%.0f" y="29">level (right axis)</text>`+"\n", lx, lx+16, lx+20)
	lx += 120
	p(`<line x1="%.0f" y1="25" x2="%.0f" y2="25" stroke="#777" stroke-width="1.5" stroke-dasharray="4 3"/><text x="%.0f" y="29">partial: fraction of the band</text>`+"\n", lx, lx+16, lx+20)

	for i, run := range sc.Runs {
		top := svgTop + float64(i)*svgPanelH + svgGap
		y := func(f float64) float64 { return top + svgPlotH*(1-f) }
		p(`<g class="panel">` + "\n")
		p(`<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", svgLeft, top-8, esc(run.System))
		// The judged phases, shaded; the phases' names.
		start := 0.0
		for _, ph := range sc.Phases {
			if ph.Judged {
				p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f2f2f2"/>`+"\n", x(start), top, x(start+ph.Seconds)-x(start), svgPlotH)
			}
			p(`<text x="%.1f" y="%.1f" fill="#555" font-size="10">%s</text>`+"\n", x(start)+3, top+11, esc(ph.Name))
			start += ph.Seconds
		}
		p(`<rect x="%.0f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", svgLeft, top, plotW, svgPlotH)
		for _, f := range []float64{0, 0.5, 1} {
			p(`<text x="%.0f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", svgLeft-4, y(f)+4, 100*f)
		}
		shares := admittedShares(run.Bins, binSeconds)
		for c := range overloadClasses {
			var pts []string
			for s, row := range shares {
				if !math.IsNaN(row[c]) {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(s)+0.5), y(row[c])))
				}
			}
			p(`<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", classColors[c], strings.Join(pts, " "))
		}
		if len(run.Levels) > 0 && maxLevelIndex > 0 {
			ly := func(idx int) float64 { return top + svgPlotH*(1-float64(idx)/float64(maxLevelIndex)) }
			p(`<polyline fill="none" stroke="black" stroke-width="1.5" points="%s"/>`+"\n", levelSteps(run.Levels, total, x, ly))
			if pts := partialSteps(run.Levels, total, x, y); pts != "" {
				p(`<polyline fill="none" stroke="#777" stroke-width="1.5" stroke-dasharray="4 3" points="%s"/>`+"\n", pts)
			}
			for idx := 0; idx <= maxLevelIndex; idx++ {
				p(`<text x="%.0f" y="%.1f">%d</text>`+"\n", svgWidth-svgRight+4, ly(idx)+4, idx)
			}
		}
		p("</g>\n")
	}
	axisY := svgTop + float64(len(sc.Runs))*svgPanelH + 14
	step := 10.0
	if total <= 30 {
		step = 5
	}
	for t := 0.0; t <= total+1e-9; t += step {
		p(`<text x="%.1f" y="%.0f" text-anchor="middle">%.0f</text>`+"\n", x(t), axisY, t)
	}
	p(`<text x="%.0f" y="%.0f">seconds</text>`+"\n", svgWidth-svgRight+14, axisY)
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// levelSteps is the published level as a step line over [0, total].
func levelSteps(points []levelPoint, total float64, x func(float64) float64, y func(int) float64) string {
	var pts []string
	cur := points[0].Index
	for _, pt := range points {
		if pt.At <= 0 {
			cur = pt.Index
		}
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(0), y(cur)))
	for _, pt := range points {
		if pt.At <= 0 || pt.At > total || pt.Index == cur {
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.At), y(cur)), fmt.Sprintf("%.1f,%.1f", x(pt.At), y(pt.Index)))
		cur = pt.Index
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(total), y(cur)))
	return strings.Join(pts, " ")
}

// partialSteps is the published partial fraction as a step line (0 while
// partial is null); "" when the daemon never published a partial.
func partialSteps(points []levelPoint, total float64, x func(float64) float64, y func(float64) float64) string {
	published := false
	for _, pt := range points {
		published = published || pt.Partial != nil
	}
	if !published {
		return ""
	}
	frac := func(pt levelPoint) float64 {
		if pt.Partial == nil {
			return 0
		}
		return pt.Partial.Fraction
	}
	cur := 0.0
	for _, pt := range points {
		if pt.At <= 0 {
			cur = frac(pt)
		}
	}
	pts := []string{fmt.Sprintf("%.1f,%.1f", x(0), y(cur))}
	for _, pt := range points {
		if pt.At <= 0 || pt.At > total {
			continue
		}
		f := frac(pt)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.At), y(cur)), fmt.Sprintf("%.1f,%.1f", x(pt.At), y(f)))
		cur = f
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(total), y(cur)))
	return strings.Join(pts, " ")
}

// esc escapes text for XML.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
