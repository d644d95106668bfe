// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// Scrape is one capture of evictd's /metrics, named by the time it was
// taken: <unix milliseconds>.prom.
type Scrape struct {
	At   time.Time
	Path string
}

// ListScrapes returns a directory's scrapes in time order.
func ListScrapes(dir string) ([]Scrape, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Scrape
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".prom")
		if !ok || e.IsDir() {
			continue
		}
		ms, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %q: the name must be <unix milliseconds>.prom", filepath.Join(dir, e.Name()))
		}
		out = append(out, Scrape{At: time.UnixMilli(ms), Path: filepath.Join(dir, e.Name())})
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s: %d scrapes; a picture needs at least 2", dir, len(out))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// Load appends every sample of the scrapes to db, with the target labels a
// Prometheus scrape would add.
func Load(ctx context.Context, db *tsdb.DB, scrapes []Scrape, target map[string]string) error {
	st := labels.NewSymbolTable()
	for _, s := range scrapes {
		b, err := os.ReadFile(s.Path)
		if err != nil {
			return err
		}
		app := db.Appender(ctx)
		if err := appendScrape(app, textparse.NewPromParser(b, st, false), s.At.UnixMilli(), target); err != nil {
			_ = app.Rollback()
			return fmt.Errorf("%s: %w", s.Path, err)
		}
		if err := app.Commit(); err != nil {
			return fmt.Errorf("%s: %w", s.Path, err)
		}
	}
	return nil
}

func appendScrape(app storage.Appender, p textparse.Parser, ts int64, target map[string]string) error {
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, v := p.Series()
		var ls labels.Labels
		p.Labels(&ls)
		b := labels.NewBuilder(ls)
		for k, val := range target {
			b.Set(k, val)
		}
		if _, err := app.Append(0, b.Labels(), ts, v); err != nil {
			return err
		}
	}
}
