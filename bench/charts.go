package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// A chart is a file under charts/ with the caption the report gives it.
type chart struct{ file, caption string }

var ourColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}

// drawCharts draws one horizontal bar chart per scenario (ns/op, or B/key),
// the p99 latency chart and the accuracy chart.
func drawCharts(out string, res results, lat []latScenario, acc []accRow) ([]chart, error) {
	var charts []chart
	for _, sc := range res.scenarios() {
		unit, label := "ns/op", "ns per decision (median; shorter is better)"
		if strings.HasPrefix(sc, "Memory") {
			unit, label = "B/key", "heap bytes per key (shorter is better)"
		}
		var names []string
		var vals plotter.Values
		for _, p := range peers {
			if s, ok := res[sc][p.name][unit]; ok {
				names = append(names, p.name)
				vals = append(vals, s.center)
			}
		}
		if len(vals) == 0 {
			continue
		}
		file := "charts/" + slug(sc) + ".png"
		if err := barChart(filepath.Join(out, file), sc, label, names, vals); err != nil {
			return nil, err
		}
		charts = append(charts, chart{file, sc + ": " + label})
	}
	for _, ls := range lat {
		var names []string
		var vals plotter.Values
		for _, l := range ls.rows {
			names = append(names, l.impl)
			vals = append(vals, float64(l.p99.Nanoseconds()))
		}
		file := "charts/latency-p99-" + slug(ls.bench) + ".png"
		title := fmt.Sprintf("%s (%s), %d goroutines", ls.bench, ls.what, latencyWorkers())
		if err := barChart(filepath.Join(out, file), title, "p99 latency of one decision, ns (shorter is better)", names, vals); err != nil {
			return nil, err
		}
		charts = append(charts, chart{file, "p99 latency of single decisions, " + ls.bench + ": " + ls.what})
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Limit %d/s: admitted vs offered", accuracyLimit)
	p.X.Label.Text = "offered per second"
	p.Y.Label.Text = "admitted per second (over a minute)"
	p.Legend.Top, p.Legend.Left = true, true
	var lines []any
	for _, row := range acc {
		xys := make(plotter.XYs, len(offeredRates))
		for i, o := range offeredRates {
			xys[i] = plotter.XY{X: float64(o), Y: row.admitted[i]}
		}
		lines = append(lines, row.name, xys)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(out, "charts/accuracy.png")); err != nil {
		return nil, err
	}
	charts = append(charts, chart{"charts/accuracy.png", "accuracy: admitted against offered load, limit 10/s"})
	return charts, nil
}

func barChart(path, title, label string, names []string, vals plotter.Values) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = label
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return err
	}
	bars.Horizontal = true
	bars.LineStyle.Width = 0
	bars.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	p.Add(bars)
	// Our bar again, in its own colour.
	for i, n := range names {
		if n == "atomiclimit" {
			ours := make(plotter.Values, len(vals))
			ours[i] = vals[i]
			b, err := plotter.NewBarChart(ours, vg.Points(14))
			if err != nil {
				return err
			}
			b.Horizontal = true
			b.LineStyle.Width = 0
			b.Color = ourColor
			p.Add(b)
		}
	}
	p.NominalY(names...)
	p.X.Min = 0
	return p.Save(7*vg.Inch, vg.Length(1.2+0.32*float64(len(names)))*vg.Inch, path)
}

func slug(s string) string {
	r := strings.NewReplacer("/", "-", "=", "-", " ", "-")
	return strings.ToLower(r.Replace(s))
}
