// SPDX-License-Identifier: Apache-2.0

package options

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/trace"
)

// FromTrace are the recorded agent's options, rebuilt from the
// trace's header: its flags, with its config file (kept in the header) or
// configPath in its place. With configPath, the recorded flags that set
// what a config file sets are dropped: the file is the whole
// configuration.
func FromTrace(h trace.Header, configPath string) (*Options, error) {
	drop := map[string]bool{"config": true}
	if configPath != "" {
		for _, name := range configFlagNames() {
			drop[name] = true
		}
	}
	args := withoutFlags(h.Args, drop)
	switch {
	case configPath != "":
		args = append(args, "--config="+configPath)
	case h.Config != "":
		dir, err := os.MkdirTemp("", "evictd-replay-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(h.Config), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config="+path)
	}
	o, fs := runFlags()
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("the trace's flags %q: %w", strings.Join(h.Args, " "), err)
	}
	if o.NodeName == "" {
		o.NodeName = h.Node
	}
	if err := o.Complete(); err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
		if configPath == "" {
			return nil, fmt.Errorf("the trace's configuration: %s", msg)
		}
		return nil, errors.New(msg)
	}
	return o, nil
}

// runFlags are the flags a running agent was given (`evictd run`'s, but
// for those that print and exit), parsing into new options.
func runFlags() (*Options, *pflag.FlagSet) {
	o := NewOptions()
	s := &cliflag.Sections{}
	o.AddFlags(s)
	var format, level string
	logging.AddFlags(s.Section(SectionLogging), &format, &level)
	return o, s.FlagSet("run")
}

// configFlagNames are the flags of `evictd run` that set what a config
// file sets.
func configFlagNames() []string {
	file, ths, eviction := pflag.NewFlagSet("", pflag.ContinueOnError), pflag.NewFlagSet("", pflag.ContinueOnError), pflag.NewFlagSet("", pflag.ContinueOnError)
	(&config.Config{}).BindFlags(file, ths, eviction)
	var names []string
	for _, fs := range []*pflag.FlagSet{file, ths, eviction} {
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	}
	return names
}

// withoutFlags drops the long flags named in drop from args, in either
// form: --name=value, or --name value (a flag that takes one).
func withoutFlags(args []string, drop map[string]bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !drop[name] {
			out = append(out, a)
			continue
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !isBoolFlag(name) {
			i++ // its value
		}
	}
	return out
}

// isBoolFlag: a run flag that takes no separate value.
func isBoolFlag(name string) bool {
	_, fs := runFlags()
	f := fs.Lookup(name)
	return f != nil && f.NoOptDefVal != ""
}
