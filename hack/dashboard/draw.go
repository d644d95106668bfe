// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Grid geometry: Grafana's 24 columns and 30 px rows, on a 1560 px canvas.
const (
	canvasWidth = 1560
	columnWidth = canvasWidth / 24
	rowHeight   = 30
	headerH     = 44
	pad         = 8
	lineH       = 15 // the font's 13 px and 2 px of leading
)

// Grafana's dark theme and its classic palette.
var (
	background = color.RGBA{0x11, 0x12, 0x17, 0xff}
	panelFill  = color.RGBA{0x18, 0x1b, 0x1f, 0xff}
	border     = color.RGBA{0x2c, 0x32, 0x35, 0xff}
	gridLine   = color.RGBA{0x24, 0x29, 0x2e, 0xff}
	textColor  = color.RGBA{0xcc, 0xcc, 0xdc, 0xff}
	dimText    = color.RGBA{0x8e, 0x8e, 0x9e, 0xff}
	palette    = []color.RGBA{
		{0x73, 0xbf, 0x69, 0xff}, {0xf2, 0xcc, 0x0c, 0xff}, {0x8a, 0xb8, 0xff, 0xff}, {0xff, 0x78, 0x0a, 0xff},
		{0xf2, 0x49, 0x5c, 0xff}, {0x57, 0x94, 0xf2, 0xff}, {0xb8, 0x77, 0xd9, 0xff}, {0x70, 0xdb, 0xed, 0xff},
		{0xfa, 0xde, 0x2a, 0xff}, {0xe0, 0x75, 0x2d, 0xff},
	}
)

// Canvas is the picture being drawn.
type Canvas struct {
	img *image.RGBA
}

// NewCanvas sizes the picture to hold every panel.
func NewCanvas(d *Dashboard) *Canvas {
	bottom := 0
	for _, p := range d.Panels {
		bottom = max(bottom, p.GridPos.Y+p.GridPos.H)
	}
	img := image.NewRGBA(image.Rect(0, 0, canvasWidth, headerH+bottom*rowHeight+pad))
	draw.Draw(img, img.Bounds(), &image.Uniform{background}, image.Point{}, draw.Src)
	return &Canvas{img: img}
}

// Header writes the dashboard's title and where its data came from.
func (c *Canvas) Header(title, subtitle string) {
	c.text(pad, 20, title, textColor)
	c.text(pad, 36, subtitle, dimText)
}

// Row draws a row panel: a section title across the grid.
func (c *Canvas) Row(p Panel) {
	r := c.rect(p.GridPos)
	c.text(r.Min.X+pad, r.Min.Y+20, p.Title, textColor)
}

// TimeSeries draws a time-series panel with its series over w.
func (c *Canvas) TimeSeries(p Panel, series []Series, w Window) {
	r := c.rect(p.GridPos).Inset(3)
	draw.Draw(c.img, r, &image.Uniform{panelFill}, image.Point{}, draw.Src)
	c.frame(r, border)
	c.text(r.Min.X+pad, r.Min.Y+18, p.Title, textColor)

	legendRows := c.legendRows(series, r.Dx()-2*pad)
	plot := image.Rect(r.Min.X+76, r.Min.Y+30, r.Max.X-pad, r.Max.Y-pad-18-len(legendRows)*lineH)
	if plot.Dy() < 30 {
		legendRows = nil
		plot.Max.Y = r.Max.Y - pad - 18
	}
	if len(series) == 0 {
		c.text(plot.Min.X+plot.Dx()/2-21, plot.Min.Y+plot.Dy()/2, "No data", dimText)
		return
	}
	if p.FieldConfig.Defaults.Custom.Stacking.Mode == "normal" {
		series = Stack(series)
	}
	unit := p.FieldConfig.Defaults.Unit
	lo, hi := yRange(series)
	ticks := axisTicks(lo, hi, unit)
	lo, hi = ticks[0], ticks[len(ticks)-1]
	y := func(v float64) int { return plot.Max.Y - int(math.Round((v-lo)/(hi-lo)*float64(plot.Dy()))) }
	x := func(t int64) int {
		span := w.End.Sub(w.Start).Milliseconds()
		return plot.Min.X + int(math.Round(float64(t-w.Start.UnixMilli())/float64(span)*float64(plot.Dx())))
	}
	for _, v := range ticks {
		c.hline(plot.Min.X, plot.Max.X, y(v), gridLine)
		label := formatValue(v, unit)
		c.text(plot.Min.X-6-7*len(label), y(v)+4, label, dimText)
	}
	for _, t := range timeTicks(w, 5) {
		px := x(t.UnixMilli())
		c.vline(px, plot.Min.Y, plot.Max.Y, gridLine)
		label := t.UTC().Format("15:04:05")
		if lx := px - 7*len(label)/2; lx+7*len(label) <= r.Max.X-2 {
			c.text(lx, plot.Max.Y+14, label, dimText)
		}
	}
	gap := 3 * w.Step.Milliseconds()
	for i, s := range series {
		col := palette[i%len(palette)]
		for k := 1; k < len(s.T); k++ {
			if s.T[k]-s.T[k-1] > gap {
				continue
			}
			c.line(x(s.T[k-1]), y(s.V[k-1]), x(s.T[k]), y(s.V[k]), col)
		}
		if len(s.T) == 1 {
			c.line(x(s.T[0])-1, y(s.V[0]), x(s.T[0])+1, y(s.V[0]), col)
		}
	}
	ly := plot.Max.Y + 18 + lineH
	for _, row := range legendRows {
		lx := r.Min.X + pad
		for _, i := range row {
			sq := image.Rect(lx, ly-9, lx+12, ly-6)
			draw.Draw(c.img, sq, &image.Uniform{palette[i%len(palette)]}, image.Point{}, draw.Src)
			c.text(lx+16, ly, series[i].Legend, textColor)
			lx += legendWidth(series[i].Legend)
		}
		ly += lineH
	}
}

// legendRows flows the legend entries into rows that fit width.
func (c *Canvas) legendRows(series []Series, width int) [][]int {
	var rows [][]int
	var row []int
	used := 0
	for i, s := range series {
		w := legendWidth(s.Legend)
		if used+w > width && len(row) > 0 {
			rows = append(rows, row)
			row, used = nil, 0
		}
		row = append(row, i)
		used += w
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	return rows
}

func legendWidth(s string) int { return 16 + 7*len(s) + 18 }

func (c *Canvas) rect(g GridPos) image.Rectangle {
	x0 := g.X * columnWidth
	y0 := headerH + g.Y*rowHeight
	return image.Rect(x0, y0, x0+g.W*columnWidth, y0+g.H*rowHeight)
}

func (c *Canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func (c *Canvas) frame(r image.Rectangle, col color.Color) {
	c.hline(r.Min.X, r.Max.X-1, r.Min.Y, col)
	c.hline(r.Min.X, r.Max.X-1, r.Max.Y-1, col)
	c.vline(r.Min.X, r.Min.Y, r.Max.Y-1, col)
	c.vline(r.Max.X-1, r.Min.Y, r.Max.Y-1, col)
}

func (c *Canvas) hline(x0, x1, y int, col color.Color) {
	for x := x0; x <= x1; x++ {
		c.img.Set(x, y, col)
	}
}

func (c *Canvas) vline(x, y0, y1 int, col color.Color) {
	for y := y0; y <= y1; y++ {
		c.img.Set(x, y, col)
	}
}

// line draws a two-pixel-wide segment (Bresenham, doubled vertically).
func (c *Canvas) line(x0, y0, x1, y1 int, col color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		c.img.Set(x0, y0, col)
		c.img.Set(x0, y0+1, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// yRange is the range the y axis must show: from zero unless values go
// below it, and never empty.
func yRange(series []Series) (lo, hi float64) {
	lo, hi = 0, math.Inf(-1)
	for _, s := range series {
		for _, v := range s.V {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// axisTicks returns the y axis' ticks; byte axes get round numbers of the
// binary unit their range is shown in, as Grafana's bytes unit does.
func axisTicks(lo, hi float64, unit string) []float64 {
	if unit != "bytes" {
		return niceTicks(lo, hi, 4)
	}
	scale := 1.0
	for _, s := range []float64{1 << 30, 1 << 20, 1 << 10} {
		if math.Max(math.Abs(lo), math.Abs(hi)) >= s {
			scale = s
			break
		}
	}
	ticks := niceTicks(lo/scale, hi/scale, 4)
	for i := range ticks {
		ticks[i] *= scale
	}
	return ticks
}

// niceTicks returns about n+1 round values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; v < hi+step*0.999; v += step {
		out = append(out, v)
	}
	if len(out) < 2 {
		out = append(out, start+step)
	}
	return out
}

// timeTicks returns about n round instants within w.
func timeTicks(w Window, n int) []time.Time {
	span := w.End.Sub(w.Start)
	step := time.Second
	for _, s := range []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute} {
		step = s
		if span/s <= time.Duration(n) {
			break
		}
	}
	var out []time.Time
	for t := w.Start.Truncate(step).Add(step); !t.After(w.End); t = t.Add(step) {
		out = append(out, t)
	}
	return out
}

// formatValue writes an axis value in a panel's unit, as Grafana would.
func formatValue(v float64, unit string) string {
	switch unit {
	case "bytes":
		for _, u := range []struct {
			name string
			size float64
		}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if math.Abs(v) >= u.size {
				return trim(v/u.size) + " " + u.name
			}
		}
		return trim(v) + " B"
	case "s":
		switch {
		case v == 0:
			return "0"
		case math.Abs(v) < 1e-3:
			return trim(v*1e6) + " us"
		case math.Abs(v) < 1:
			return trim(v*1e3) + " ms"
		}
		return trim(v) + " s"
	}
	switch {
	case math.Abs(v) >= 1e6:
		return trim(v/1e6) + " Mil"
	case math.Abs(v) >= 1e3:
		return trim(v/1e3) + " K"
	}
	return trim(v)
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}
