// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// scrapeRecorder keeps every scrape of evictd's /metrics as a file named by
// its time (<unix milliseconds>.prom), as Prometheus would have scraped it:
// hack/dashboard draws the dashboard from them.
type scrapeRecorder struct {
	url, dir string
	every    time.Duration
	stop     context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	n        int
}

func startScrapes(addr, dir string, every time.Duration) (*scrapeRecorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &scrapeRecorder{url: "http://" + addr + "/metrics", dir: dir, every: every, stop: cancel}
	r.wg.Add(1)
	go r.loop(ctx)
	return r, nil
}

func (r *scrapeRecorder) loop(ctx context.Context) {
	defer r.wg.Done()
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		if err := r.once(ctx); err != nil && ctx.Err() == nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *scrapeRecorder) once(ctx context.Context) error {
	at := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", r.url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	name := filepath.Join(r.dir, fmt.Sprintf("%d.prom", at.UnixMilli()))
	if err := os.WriteFile(name, body, 0o644); err != nil {
		return err
	}
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return nil
}

// Stop ends the recording; it returns how many scrapes were kept and the
// last error, if any scrape failed.
func (r *scrapeRecorder) Stop() (int, error) {
	r.stop()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.err
}
