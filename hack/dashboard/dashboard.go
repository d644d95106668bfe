// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Dashboard is the part of a Grafana dashboard's JSON model the picture
// needs: the panels' places on the 24-column grid and their queries.
type Dashboard struct {
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one Grafana panel; rows are panels of type "row".
type Panel struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	GridPos     GridPos  `json:"gridPos"`
	Targets     []Target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit   string `json:"unit"`
			Custom struct {
				Stacking struct {
					Mode string `json:"mode"`
				} `json:"stacking"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// GridPos is a panel's place in grid units: 24 columns wide, rows of 30 px.
type GridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Target is one query of a panel.
type Target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// ReadDashboard reads a dashboard's JSON model.
func ReadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Panels) == 0 {
		return nil, fmt.Errorf("%s: no panels", path)
	}
	return &d, nil
}

// Expand replaces the Grafana variables the dashboard's queries use with
// what Grafana would put there: every cluster, job and node (the variables'
// "All"), and a rate window of four scrape intervals (Grafana's
// $__rate_interval is at least four).
func Expand(expr string, scrapeInterval time.Duration) string {
	window := (4 * scrapeInterval).Round(time.Second)
	if window < time.Second {
		window = time.Second
	}
	r := strings.NewReplacer(
		"$__rate_interval", promDuration(window),
		"${__rate_interval}", promDuration(window),
	)
	for _, v := range []string{"cluster", "job", "node"} {
		expr = strings.NewReplacer("$"+v, ".*", "${"+v+"}", ".*").Replace(expr)
	}
	return r.Replace(expr)
}

func promDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", int(d/time.Second))
}

// Legend renders a legendFormat ({{label}} placeholders) for one series.
func Legend(format string, labels map[string]string) string {
	if format == "" {
		var parts []string
		for k, v := range labels {
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	out := format
	for {
		i := strings.Index(out, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(out[i:], "}}")
		if j < 0 {
			break
		}
		name := strings.TrimSpace(out[i+2 : i+j])
		out = out[:i] + labels[name] + out[i+j+2:]
	}
	return strings.Join(strings.Fields(out), " ")
}
