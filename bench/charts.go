package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// A chart is a file under charts/ with the caption the report gives it,
// and what it shows: a scenario's name, "latency " and a hot-key
// scenario's, "scaling" or "accuracy".
type chart struct{ file, caption, of string }

// chartsOf returns the charts of what, in order.
func chartsOf(cs []chart, what string) []chart {
	var out []chart
	for _, c := range cs {
		if c.of == what {
			out = append(out, c)
		}
	}
	return out
}

// The colours: ours stands out, the peers share one, the floor (not a
// limiter) is grey.
var (
	ourColor   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	peerColor  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	floorColor = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	// shades for p50, p99, p99.9, lightest first, for peers and for ours.
	peerShades = []color.Color{color.RGBA{0x9e, 0xc9, 0xe9, 0xff}, color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0x0b, 0x35, 0x5a, 0xff}}
	ourShades  = []color.Color{color.RGBA{0xf4, 0xa5, 0xa5, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x7a, 0x10, 0x10, 0xff}}
)

func implColor(name string) color.Color {
	switch name {
	case ours:
		return ourColor
	case floorName, "clock only":
		return floorColor
	}
	return peerColor
}

// drawCharts draws one horizontal bar chart per scenario (ns/op, or B/key),
// one latency chart per hot-key scenario, the accuracy chart and, where the
// run measured several core counts, the scaling figure.
func drawCharts(out string, res results, info runInfo, cpus []int, lat []latScenario, acc []accRow) ([]chart, error) {
	var charts []chart
	for _, sc := range res.scenarios() {
		unit, label, format := "ns/op", "ns per decision (median; shorter is better)", fmtNs
		if strings.HasPrefix(sc, "Memory") {
			unit, label, format = "B/key", "heap bytes per key (shorter is better)", fmtCount
		}
		if isDoor(sc) {
			label = "ns per request (median; shorter is better), allocations beside"
		}
		var bars []bar
		for _, name := range implNames(sc) {
			if s, ok := res[sc][name][unit]; ok {
				text := fmtUnit(s.center, unit)
				if a, ok := res[sc][name]["allocs/op"]; ok && isDoor(sc) {
					text += " · " + plural(a.center, "alloc")
				}
				bars = append(bars, bar{name: name, v: s.center, color: implColor(name), label: text})
			}
		}
		if len(bars) == 0 {
			continue
		}
		file := "charts/" + slug(sc) + ".png"
		if err := barChart(filepath.Join(out, file), scenarioTitle(sc), label, bars, format); err != nil {
			return nil, err
		}
		charts = append(charts, chart{file, scenarioTitle(sc) + ": " + label, sc})
	}
	for _, ls := range lat {
		file := "charts/latency-" + slug(ls.bench) + ".png"
		if err := latencyChart(filepath.Join(out, file), ls); err != nil {
			return nil, err
		}
		charts = append(charts, chart{file, latencyTitle(ls) + ": p50, p99 and p99.9", "latency " + ls.bench})
	}
	ok, err := scalingFigure(filepath.Join(out, "charts/scaling.png"), res, info, cpus)
	if err != nil {
		return nil, err
	}
	if ok {
		charts = append(charts, chart{"charts/scaling.png", "Time per call against cores, one panel per scaling scenario, atomiclimit beside the peers and the floor", "scaling"})
	}
	if err := accuracyChart(filepath.Join(out, "charts/accuracy.png"), acc); err != nil {
		return nil, err
	}
	charts = append(charts, chart{"charts/accuracy.png", fmt.Sprintf("Accuracy, one panel per algorithm: admitted per second against offered, limit %d/s", accuracyLimit), "accuracy"})
	return charts, nil
}

// A bar is one labelled value of a horizontal bar chart.
type bar struct {
	name  string
	v     float64
	color color.Color
	label string
}

// hbars draws groups of horizontal bars, one group per row (row 0 at the
// top), each bar from the axis's left edge to its value, with its label
// after its end. Its glyph boxes make the plot leave room for the labels,
// so no bar or label is cut off at any scale.
type hbars struct {
	rows  [][]bar
	width vg.Length // of one bar
	label draw.TextStyle
}

func (h *hbars) y(row, i int) float64 {
	n := len(h.rows[row])
	// Bars of a group are spread over 0.8 of a row, first on top.
	return float64(len(h.rows)-1-row) + 0.8*(float64(n-1)/2-float64(i))/float64(max(n, 1))
}

func (h *hbars) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	x0 := trX(plt.X.Min)
	for r, row := range h.rows {
		for i, b := range row {
			if b.v <= 0 {
				continue
			}
			y := trY(h.y(r, i))
			x1 := trX(b.v)
			c.FillPolygon(b.color, []vg.Point{{X: x0, Y: y - h.width/2}, {X: x1, Y: y - h.width/2}, {X: x1, Y: y + h.width/2}, {X: x0, Y: y + h.width/2}})
			c.FillText(h.label, vg.Point{X: x1 + vg.Points(3), Y: y}, b.label)
		}
	}
}

func (h *hbars) GlyphBoxes(plt *plot.Plot) []plot.GlyphBox {
	var boxes []plot.GlyphBox
	for r, row := range h.rows {
		for i, b := range row {
			if b.v <= 0 {
				continue
			}
			rect := h.label.Rectangle(b.label)
			boxes = append(boxes, plot.GlyphBox{
				X: plt.X.Norm(b.v), Y: plt.Y.Norm(h.y(r, i)),
				Rectangle: vg.Rectangle{Min: vg.Point{X: vg.Points(3), Y: rect.Min.Y}, Max: vg.Point{X: vg.Points(3) + rect.Max.X, Y: rect.Max.Y}},
			})
		}
	}
	return boxes
}

// values returns every positive value of the chart.
func (h *hbars) values() []float64 {
	var vs []float64
	for _, row := range h.rows {
		for _, b := range row {
			if b.v > 0 {
				vs = append(vs, b.v)
			}
		}
	}
	return vs
}

// logAbove: a chart whose largest value is more than this many times its
// smallest gets a log axis, so that the small bars stay readable.
const logAbove = 25

// newBarPlot sets up a plot of h: names down the left, values along the
// bottom from zero (linear) or from the decade below the smallest (log).
func newBarPlot(title, xlabel string, names []string, h *hbars, format func(float64) string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	h.label = p.X.Tick.Label
	h.label.XAlign, h.label.YAlign = draw.XLeft, draw.YCenter
	p.Add(h)
	vs := h.values()
	lo, hi := math.Inf(1), 0.0
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == 0 {
		hi, lo = 1, 1
	}
	if hi/lo > logAbove {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{format}
		p.X.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		p.X.Max = hi
		p.X.Label.Text += " (log scale)"
	} else {
		p.X.Min, p.X.Max = 0, hi
	}
	rev := make([]string, len(names))
	for i, n := range names {
		rev[len(names)-1-i] = n
	}
	p.NominalY(rev...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(names))-0.4
	return p
}

func barChart(path, title, xlabel string, bars []bar, format func(float64) string) error {
	h := &hbars{width: vg.Points(13)}
	var names []string
	for _, b := range bars {
		h.rows = append(h.rows, []bar{b})
		names = append(names, b.name)
	}
	p := newBarPlot(title, xlabel, names, h, format)
	return saveWithMargin(p, 7.5*vg.Inch, vg.Length(1.2+0.34*float64(len(names)))*vg.Inch, path)
}

// saveWithMargin saves p as a PNG with a few points of blank on the left:
// gonum lays the longest name down the left flush with the edge, where its
// first letter can lose a pixel column.
func saveWithMargin(p *plot.Plot, w, h vg.Length, path string) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, vg.Points(6), 0, 0, 0))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// latencyChart draws p50, p99 and p99.9 of every implementation of one
// hot-key scenario, three bars a row, on a log axis when they span much.
func latencyChart(path string, ls latScenario) error {
	h := &hbars{width: vg.Points(8)}
	var names []string
	for _, r := range ls.rows {
		shades := peerShades
		if r.impl == ours {
			shades = ourShades
		}
		var row []bar
		for i, d := range []float64{float64(r.p50), float64(r.p99), float64(r.p999)} {
			c := shades[i]
			if r.impl == "clock only" || r.impl == "floor" {
				c = shadeOf(floorColor, i)
			}
			row = append(row, bar{v: d, color: c, label: fmtDur(time.Duration(d))})
		}
		h.rows = append(h.rows, row)
		names = append(names, r.impl)
	}
	p := newBarPlot(latencyTitle(ls), "latency of one decision (shorter is better)", names, h, fmtNs)
	l := plot.NewLegend()
	entries := []string{"p50", "p99", "p99.9"}
	for i, q := range entries {
		l.Add(q, swatch{peerShades[i]})
	}
	return saveWithLegend(p, l, entries, 8*vg.Inch, vg.Length(1.3+0.55*float64(len(names)))*vg.Inch, path)
}

// latencyTitle says in words what a latency chart shows.
func latencyTitle(ls latScenario) string {
	return fmt.Sprintf("Latency of single decisions, one key from %d goroutines%s", latencyWorkers(), strings.TrimPrefix(hotTitle(ls.hotScenario), "One key from every core"))
}

// shadeOf lightens c for i = 0, keeps it for 1 and darkens it for 2.
func shadeOf(c color.RGBA, i int) color.Color {
	f := []float64{1.5, 1, 0.6}[i]
	s := func(v uint8) uint8 { return uint8(min(255, float64(v)*f)) }
	return color.RGBA{s(c.R), s(c.G), s(c.B), 0xff}
}

// swatch is a legend thumbnail: a filled box.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// saveWithLegend draws the plot on the left and its legend in a column of
// its own on the right, off the data.
func saveWithLegend(p *plot.Plot, l plot.Legend, entries []string, w, h vg.Length, path string) error {
	var strip vg.Length
	for _, e := range entries {
		strip = max(strip, l.TextStyle.Width(e))
	}
	strip += l.ThumbnailWidth + vg.Points(24)
	img := vgimg.New(w, h)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -strip, 0, 0))
	l.Top, l.Left = true, true
	l.Draw(draw.Crop(dc, w-strip+vg.Points(8), 0, 0, -vg.Points(24)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// logTicks labels 1, 2 and 5 times each power of ten on a log axis of up
// to three decades, and the powers of ten alone (with unlabelled minor
// ticks) on a longer one.
type logTicks struct{ format func(float64) string }

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	wide := math.Log10(hi/lo) > 3
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow10(int(e))
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			label := ""
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				label = t.format(v)
			}
			ts = append(ts, plot.Tick{Value: v, Label: label})
		}
	}
	return ts
}

// plural writes a count of a thing: 1 alloc, 5 allocs.
func plural(n float64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%.0f %ss", n, thing)
}

// fmtCount writes a tick of a count or a size: 500, 2k, 1M.
func fmtCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// fmtNs writes a tick of nanoseconds: 500 ns, 2 µs, 1 ms.
func fmtNs(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%g ms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%g µs", v/1e3)
	}
	return fmt.Sprintf("%g ns", v)
}

func slug(s string) string {
	r := strings.NewReplacer("/", "-", "=", "-", " ", "-")
	return strings.ToLower(r.Replace(s))
}

// accuracyChart draws one small panel per algorithm, all on the same
// log-log axes: what it admitted per second over the run against what was
// offered (evenly spaced), the most it admitted in any one second of
// clumped traffic, the offered load itself (grey crosses: what admitting
// everything would give) and the limit (dashed). One shared legend below
// the panels, and a title above them.
func accuracyChart(path string, acc []accRow) error {
	const cols = 4
	rows := (len(acc) + cols - 1) / cols
	lo, hi := float64(offeredRates[0])/1.15, float64(offeredRates[len(offeredRates)-1])*1.15
	var xt []plot.Tick
	for _, o := range offeredRates {
		label := ""
		if o == 1 || o == 10 || o == 100 {
			label = fmt.Sprint(o)
		}
		xt = append(xt, plot.Tick{Value: float64(o), Label: label})
	}
	limitStyle := func(l *plotter.Line) {
		l.Color, l.Dashes, l.Width = floorColor, []vg.Length{vg.Points(5), vg.Points(3)}, vg.Points(1)
	}
	offeredStyle := draw.GlyphStyle{Color: floorColor, Radius: vg.Points(3), Shape: draw.CrossGlyph{}}
	clumpColor := color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
	}
	for i, row := range acc {
		p := plot.New()
		p.Title.Text = row.name
		p.Title.TextStyle.Font.Size = vg.Points(9)
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.ConstantTicks(xt), logTicks{fmtCount}
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
		p.X.Label.Text = "offered per second"
		p.X.Label.TextStyle.Font.Size = vg.Points(8)
		p.Add(plotter.NewGrid())
		limit, err := plotter.NewLine(plotter.XYs{{X: lo, Y: accuracyLimit}, {X: hi, Y: accuracyLimit}})
		if err != nil {
			return err
		}
		limitStyle(limit)
		var offered, admitted, clumped plotter.XYs
		for j, o := range offeredRates {
			offered = append(offered, plotter.XY{X: float64(o), Y: float64(o)})
			admitted = append(admitted, plotter.XY{X: float64(o), Y: row.admitted[j]})
			clumped = append(clumped, plotter.XY{X: float64(o), Y: float64(row.clumped[j])})
		}
		op, err := plotter.NewScatter(offered)
		if err != nil {
			return err
		}
		op.GlyphStyle = offeredStyle
		c := peerColor
		if strings.HasPrefix(row.name, ours) {
			c = ourColor
		}
		al, ap, err := plotter.NewLinePoints(admitted)
		if err != nil {
			return err
		}
		al.Color, al.Width, ap.Color, ap.Shape, ap.Radius = c, vg.Points(1.5), c, draw.CircleGlyph{}, vg.Points(2.5)
		cl, cp, err := plotter.NewLinePoints(clumped)
		if err != nil {
			return err
		}
		cl.Color, cl.Dashes, cp.Color, cp.Shape, cp.Radius = clumpColor, []vg.Length{vg.Points(1), vg.Points(2)}, clumpColor, draw.TriangleGlyph{}, vg.Points(2.5)
		p.Add(limit, op, cl, cp, al, ap)
		grid[i/cols][i%cols] = p
	}

	w, h := 12*vg.Inch, vg.Length(0.9+2.9*float64(rows))*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	const titleH, legendH = 28, 40
	title := fmt.Sprintf("Accuracy, one panel per algorithm: admitted per second (up) against offered per second (across), limit %d per second, log-log axes", accuracyLimit)
	ts := plot.New().Title.TextStyle
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YCenter
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(titleH)/2}, title)

	limit, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}})
	limitStyle(limit)
	op, _ := plotter.NewScatter(plotter.XYs{{X: 0, Y: 0}})
	op.GlyphStyle = offeredStyle
	cl, cp, _ := plotter.NewLinePoints(plotter.XYs{{X: 0, Y: 0}})
	cl.Color, cl.Dashes, cp.Color, cp.Shape = clumpColor, []vg.Length{vg.Points(1), vg.Points(2)}, clumpColor, draw.TriangleGlyph{}
	items := []legendItem{
		{"admitted per second over the minute, even arrivals: atomiclimit", []plot.Thumbnailer{swatch{ourColor}}},
		{"x/time/rate", []plot.Thumbnailer{swatch{peerColor}}},
		{"most admitted in any one second, clumped arrivals", []plot.Thumbnailer{cl, cp}},
		{"offered (admitting all)", []plot.Thumbnailer{op}},
		{fmt.Sprintf("the limit, %d/s", accuracyLimit), []plot.Thumbnailer{limit}},
	}
	drawLegendRow(draw.Crop(dc, vg.Points(24), -vg.Points(12), 0, -(h-vg.Points(legendH))), items)

	panels := draw.Crop(dc, 0, 0, vg.Points(legendH), -vg.Points(titleH))
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(14), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4)}
	canvases := plot.Align(grid, tiles, panels)
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// A legendItem is one entry of a legend drawn by drawLegendRow.
type legendItem struct {
	text   string
	thumbs []plot.Thumbnailer
}

// drawLegendRow draws items side by side across c from its top left:
// thumbnail, then text, then the next, on a new line where one would not
// fit.
func drawLegendRow(c draw.Canvas, items []legendItem) {
	style := plot.NewLegend().TextStyle
	style.XAlign, style.YAlign = draw.XLeft, draw.YCenter
	const thumbW, lineH = 20, 16
	x, y := c.Min.X, c.Max.Y-vg.Points(lineH)/2
	for _, it := range items {
		if w := vg.Points(thumbW+4) + style.Width(it.text); x > c.Min.X && x+w > c.Max.X {
			x, y = c.Min.X, y-vg.Points(lineH)
		}
		thumb := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: x, Y: y - vg.Points(4)}, Max: vg.Point{X: x + vg.Points(thumbW), Y: y + vg.Points(4)}}}
		for _, t := range it.thumbs {
			t.Thumbnail(&thumb)
		}
		x += vg.Points(thumbW + 4)
		c.FillText(style, vg.Point{X: x, Y: y}, it.text)
		x += style.Width(it.text) + vg.Points(16)
	}
}

// A scalingPanel is one scenario of the scaling figure and tables: its
// title in words, the scenario's name without /cpu=N, and the
// implementations it has, in order.
type scalingPanel struct {
	title, sc string
	names     []string
}

// scalingPanels returns the scaling scenarios that this run measured (info
// names them): one key admitted and denied, the million keys drawn
// uniformly, the HTTP door from every core.
func scalingPanels(info runInfo) []scalingPanel {
	var limiters []string
	for _, p := range peers {
		limiters = append(limiters, p.name)
	}
	var out []scalingPanel
	for _, p := range []scalingPanel{
		{"One key, every call admitted", "HotKey", limiters},
		{"One key, every call denied", "Deny", limiters},
		// Any key count: the title takes the one this run had.
		{"%s keys drawn uniformly", "Keys/dist=uniform/", limiters},
		{"HTTP middleware, " + withCommas(fmt.Sprint(doorIPs)) + " client IPs, from every core", "HTTPParallel/" + httpParallel.name, httpDoorNames()},
	} {
		for sc := range info.procsOf {
			if prefix, ok := strings.CutSuffix(p.sc, "/"); sc == p.sc || ok && strings.HasPrefix(sc, prefix+"/") {
				if ok {
					p.title = fmt.Sprintf(p.title, keysOf(sc))
				}
				p.sc = sc
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// scalingColors tell the implementations of the scaling figure apart,
// besides ours (red) and the floor (grey): one each, the same in every
// panel.
var scalingColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff}, color.RGBA{0xe3, 0x77, 0xc2, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0x0b, 0x35, 0x5a, 0xff},
	color.RGBA{0x1b, 0x5e, 0x20, 0xff},
}

// scalingFigure draws one panel per scaling scenario, ns/op (median)
// against the core counts procs for every implementation, ours beside the
// peers and the floor, with one legend for all the panels; false where the
// run measured fewer than two core counts or none of the scenarios.
func scalingFigure(path string, res results, info runInfo, procs []int) (bool, error) {
	panels := scalingPanels(info)
	if len(procs) < 2 || len(panels) == 0 {
		return false, nil
	}
	// One style per implementation across the panels.
	type style struct {
		c      color.Color
		shape  draw.GlyphDrawer
		dashes []vg.Length
	}
	styles := map[string]style{}
	var order []string
	peersSeen := 0
	for _, p := range panels {
		for _, name := range p.names {
			if _, ok := styles[name]; ok {
				continue
			}
			st := style{c: implColor(name), shape: draw.CircleGlyph{}}
			switch {
			case name == floorName:
				st.dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			case name != ours:
				i := peersSeen
				peersSeen++
				st.c, st.shape, st.dashes = scalingColors[i%len(scalingColors)], plotutil.Shape(i), plotutil.Dashes(i/len(scalingColors))
			}
			styles[name] = st
			order = append(order, name)
		}
	}
	var xt []plot.Tick
	for _, n := range procs {
		xt = append(xt, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
	}
	shown := map[string]bool{}
	drawn := 0
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.X.Label.Text = "cores (-cpu)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(xt)
		p.X.Min, p.X.Max = float64(procs[0])/1.2, float64(procs[len(procs)-1])*1.2
		p.Add(plotter.NewGrid())
		lo, hi := math.Inf(1), 0.0
		for _, name := range pn.names {
			var xys plotter.XYs
			for _, n := range procs {
				if s, ok := res.at(info, pn.sc, n)[name]["ns/op"]; ok && s.center > 0 {
					xys = append(xys, plotter.XY{X: float64(n), Y: s.center})
					lo, hi = min(lo, s.center), max(hi, s.center)
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return false, err
			}
			st := styles[name]
			line.Color, line.Dashes, pts.Color, pts.Shape, pts.Radius = st.c, st.dashes, st.c, st.shape, vg.Points(3)
			if name == ours {
				line.Width = vg.Points(2.5)
			}
			p.Add(line, pts)
			shown[name] = true
		}
		if hi == 0 {
			continue
		}
		drawn++
		if hi/lo > logAbove {
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{fmtNs}
			p.Y.Min, p.Y.Max = math.Pow10(int(math.Floor(math.Log10(lo)))), hi*1.3
			p.Y.Label.Text = "ns/op (median, log scale)"
		} else {
			p.Y.Min, p.Y.Max = 0, hi*1.1
			p.Y.Tick.Marker = nsTicks{}
			p.Y.Label.Text = "ns/op (median)"
		}
		grid[i/cols][i%cols] = p
	}
	if drawn == 0 {
		return false, nil
	}
	var items []legendItem
	for _, name := range order {
		if !shown[name] {
			continue
		}
		st := styles[name]
		line, pts, _ := plotter.NewLinePoints(plotter.XYs{{X: 0, Y: 0}})
		line.Color, line.Dashes, pts.Color, pts.Shape = st.c, st.dashes, st.c, st.shape
		if name == ours {
			line.Width = vg.Points(2.5)
		}
		items = append(items, legendItem{name, []plot.Thumbnailer{line, pts}})
	}
	w, h := 12*vg.Inch, vg.Length(1.2+4.0*float64(rows))*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	const titleH, legendH = 28, 56
	ts := plot.New().Title.TextStyle
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YCenter
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(titleH)/2}, "Time per call against cores: b.RunParallel, one goroutine per core (lower is better; flat is no scaling)")
	drawLegendRow(draw.Crop(dc, vg.Points(24), -vg.Points(12), 0, -(h-vg.Points(legendH))), items)
	panels2 := draw.Crop(dc, 0, 0, vg.Points(legendH), -vg.Points(titleH))
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(24), PadY: vg.Points(18), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4)}
	canvases := plot.Align(grid, tiles, panels2)
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return false, err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}

// nsTicks labels a linear axis of nanoseconds with gonum's default ticks.
type nsTicks struct{}

func (nsTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmtNs(ts[i].Value)
		}
	}
	return ts
}
