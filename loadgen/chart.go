package loadgen

// This file owns the SVG chart: three stacked panels over the run's time
// series (throughput, latency, lag), drawn by hand as polylines.

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

const (
	svgWidth   = 900
	panelH     = 200
	panelGap   = 50
	marginL    = 80
	marginR    = 170
	marginTop  = 40
	plotW      = svgWidth - marginL - marginR
	svgHeight  = marginTop + 3*panelH + 3*panelGap
	axisTicks  = 4
	lineStroke = 1.8
)

type svgSeries struct {
	name  string
	color string
	y     func(Sample) float64
}

type svgPanel struct {
	title  string
	unit   string
	series []svgSeries
}

// WriteSVG draws the run's series: throughput, latency and lag over time.
func WriteSVG(w io.Writer, res *Result) error {
	bw := bufio.NewWriter(w)
	panels := []svgPanel{
		{"throughput", "msgs/s", []svgSeries{
			{"acked/s", "#1f77b4", func(s Sample) float64 { return s.AckedPerSec }},
			{"consumed/s", "#2ca02c", func(s Sample) float64 { return s.ConsumedPerSec }},
			{"sent/s", "#aaaaaa", func(s Sample) float64 { return s.SentPerSec }},
		}},
		{"latency", "ms", []svgSeries{
			{"ack p50", "#9467bd", func(s Sample) float64 { return s.AckP50Ms }},
			{"ack p99", "#d62728", func(s Sample) float64 { return s.AckP99Ms }},
			{"e2e p99", "#ff7f0e", func(s Sample) float64 { return s.E2EP99Ms }},
		}},
		{"consumer lag", "records", []svgSeries{
			{"lag", "#8c564b", func(s Sample) float64 { return float64(s.Lag) }},
			{"backlog", "#e377c2", func(s Sample) float64 { return float64(s.Backlog) }},
		}},
	}
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("%s %s · %s", res.System, res.Label, res.Scenario)
	fmt.Fprintf(bw, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
	tMax := 1.0
	for _, s := range res.Series {
		tMax = math.Max(tMax, s.T)
	}
	for i, p := range panels {
		top := marginTop + i*(panelH+panelGap)
		drawPanel(bw, p, res.Series, top, tMax)
	}
	fmt.Fprintln(bw, `</svg>`)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("loadgen: write svg: %w", err)
	}
	return nil
}

func drawPanel(w io.Writer, p svgPanel, series []Sample, top int, tMax float64) {
	yMax := 0.0
	for _, s := range series {
		for _, ser := range p.series {
			if v := ser.y(s); !math.IsNaN(v) && !math.IsInf(v, 0) {
				yMax = math.Max(yMax, v)
			}
		}
	}
	yMax = niceCeil(yMax)
	bottom := top + panelH
	x := func(t float64) float64 { return marginL + t/tMax*plotW }
	y := func(v float64) float64 { return float64(bottom) - v/yMax*panelH }
	fmt.Fprintf(w, `<g class="panel"><text x="%d" y="%d" font-weight="bold">%s (%s)</text>`+"\n", marginL, top-8, p.title, p.unit)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginL, top, plotW, panelH)
	for k := 0; k <= axisTicks; k++ {
		v := yMax * float64(k) / axisTicks
		yy := y(v)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, yy, marginL+plotW, yy)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, yy+4, humanNum(v))
		t := tMax * float64(k) / axisTicks
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%.0fs</text>`+"\n", x(t), bottom+14, t)
	}
	for j, ser := range p.series {
		var pts []string
		for _, s := range series {
			v := ser.y(s)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.T), y(v)))
		}
		if len(pts) > 0 {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", ser.color, lineStroke, strings.Join(pts, " "))
		}
		ly := top + 14 + j*16
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n",
			marginL+plotW+12, ly-4, marginL+plotW+32, ly-4, ser.color)
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", marginL+plotW+38, ly, html.EscapeString(ser.name))
	}
	fmt.Fprintln(w, `</g>`)
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

func humanNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
