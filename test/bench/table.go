// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a plain-text table with aligned columns, the output format of
// every benchmark.
type Table struct {
	Title  string
	Header []string
	rows   [][]string
	Notes  []string
}

// Row appends a row; values are formatted with %v.
func (t *Table) Row(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
}

// Rows is the number of rows so far.
func (t *Table) Rows() int { return len(t.rows) }

// WriteTo writes the title, the header, a rule, the rows and the notes.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	widths := make([]int, len(t.Header))
	grow := func(row []string) {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	grow(t.Header)
	for _, r := range t.rows {
		grow(r)
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title + "\n")
	}
	line := func(row []string) {
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == len(row)-1 {
				b.WriteString(c)
				continue
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
		}
		b.WriteString("\n")
	}
	line(t.Header)
	total := 0
	for i, w := range widths {
		if i > 0 {
			total += 2
		}
		total += w
	}
	b.WriteString(strings.Repeat("-", total) + "\n")
	for _, r := range t.rows {
		line(r)
	}
	for _, n := range t.Notes {
		b.WriteString(n + "\n")
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// String is the table as WriteTo writes it.
func (t *Table) String() string {
	var b strings.Builder
	_, _ = t.WriteTo(&b)
	return b.String()
}

// CountSame summarizes repeated values: "a ×2, b ×1" for [a b a], in order
// of first appearance.
func CountSame(xs []string) string {
	var order []string
	n := map[string]int{}
	for _, x := range xs {
		if n[x] == 0 {
			order = append(order, x)
		}
		n[x]++
	}
	parts := make([]string, len(order))
	for i, x := range order {
		parts[i] = fmt.Sprintf("%s ×%d", x, n[x])
	}
	return strings.Join(parts, ", ")
}
