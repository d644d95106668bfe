// SPDX-License-Identifier: Apache-2.0

// Command dashboard draws evictd's Grafana dashboard as a PNG from scrapes of
// evictd's /metrics (make dashboard-picture takes them during the demo). Every
// panel query is evaluated by Prometheus's own engine over the scrapes, so
// the picture shows what Grafana would, not a mock-up.
//
//	dashboard --dashboard deploy/monitoring/dashboard.json --scrapes DIR --out docs/images/dashboard.png
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"time"

	"github.com/prometheus/prometheus/tsdb"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dashPath := fs.String("dashboard", "", "the dashboard's JSON model (required)")
	scrapeDir := fs.String("scrapes", "", "directory of <unix milliseconds>.prom scrapes (required)")
	out := fs.String("out", "", "the PNG to write (required)")
	node := fs.String("node", "demo-node", "the node label the scrapes get, as the chart's ServiceMonitor adds it")
	job := fs.String("job", "evictd", "the job label the scrapes get")
	subtitle := fs.String("subtitle", "", "a line under the title saying where the data came from")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, f := range []struct{ name, v string }{{"--dashboard", *dashPath}, {"--scrapes", *scrapeDir}, {"--out", *out}} {
		if f.v == "" {
			fmt.Fprintf(stderr, "dashboard: %s is required\n", f.name)
			return 2
		}
	}
	if err := render(context.Background(), *dashPath, *scrapeDir, *out, *subtitle,
		map[string]string{"instance": "127.0.0.1:9731", "node": *node, "job": *job}); err != nil {
		fmt.Fprintf(stderr, "dashboard: %v\n", err)
		return 1
	}
	return 0
}

func render(ctx context.Context, dashPath, scrapeDir, out, subtitle string, target map[string]string) error {
	d, err := ReadDashboard(dashPath)
	if err != nil {
		return err
	}
	scrapes, err := ListScrapes(scrapeDir)
	if err != nil {
		return err
	}
	db, closeDB, err := openStore(ctx, scrapes, target)
	if err != nil {
		return err
	}
	defer closeDB()
	w := windowOf(scrapes)
	ev := NewEvaluator(db, w)

	c := NewCanvas(d)
	if subtitle == "" {
		subtitle = fmt.Sprintf("%d scrapes of evictd's /metrics, %s to %s UTC, every panel's queries evaluated by Prometheus's engine",
			len(scrapes), w.Start.UTC().Format("2006-01-02 15:04:05"), w.End.UTC().Format("15:04:05"))
	}
	c.Header(d.Title, subtitle)
	var errs []error
	for _, p := range d.Panels {
		switch p.Type {
		case "row":
			c.Row(p)
		case "timeseries":
			series, err := ev.Panel(ctx, p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.TimeSeries(p, series, w)
		default:
			errs = append(errs, fmt.Errorf("panel %q: type %q is not drawn", p.Title, p.Type))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scrapeStep is the median interval between scrapes: the step a Grafana
// panel of this span would use at this resolution.
func scrapeStep(s []Scrape) time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(s); i++ {
		gaps = append(gaps, s[i].At.Sub(s[i-1].At))
	}
	sortDurations(gaps)
	step := gaps[len(gaps)/2].Round(time.Second)
	if step < time.Second {
		step = time.Second
	}
	return step
}

// openStore loads the scrapes into a TSDB in a temporary directory, which
// closing removes.
func openStore(ctx context.Context, scrapes []Scrape, target map[string]string) (*tsdb.DB, func(), error) {
	dir, err := os.MkdirTemp("", "evictd-dashboard-tsdb-")
	if err != nil {
		return nil, nil, err
	}
	db, err := tsdb.Open(dir, nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	closeDB := func() {
		db.Close()
		os.RemoveAll(dir)
	}
	if err := Load(ctx, db, scrapes, target); err != nil {
		closeDB()
		return nil, nil, err
	}
	return db, closeDB, nil
}

// windowOf is the picture's time range: every scrape, at their interval.
func windowOf(scrapes []Scrape) Window {
	return Window{Start: scrapes[0].At, End: scrapes[len(scrapes)-1].At, Step: scrapeStep(scrapes)}
}
