// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
)

// The node's hugepage pool, taken off memory.available as the kubelet does
// with its HugepageAwareEviction feature gate (beta and on by default in
// Kubernetes 1.37): summaryProviderImpl.Get and GetCPUAndMemoryStats
// (pkg/kubelet/server/stats/summary.go) pass the root cgroup's MemoryStats
// through adjustForHugePages, which lowers AvailableBytes, and only it, by
// the sum of the node's hugepages-<size> capacities, floored at 0. The
// working set is left alone, so the capacity the eviction manager derives
// (available + working set) drops by the pool too; the "pods" system
// container (allocatableMemory.available) is not adjusted. The capacities
// are cAdvisor's machine info (GetHugePagesInfo): for each directory
// hugepages-<N>kB of /sys/kernel/mm/hugepages, N KiB × its nr_hugepages.
//
// The kernel's memory cgroups do not charge hugetlb pages, so without this
// a node with 16 GiB of hugepages reserved looks 16 GiB roomier than it is.

// hugepagesDir is where the kernel lists its hugepage pools, one
// directory per page size, relative to the host root.
const hugepagesDir = "sys/kernel/mm/hugepages"

// hugepagePrefix and hugepageSuffix frame a pool directory's page size:
// hugepages-2048kB, hugepages-1048576kB.
const (
	hugepagePrefix = "hugepages-"
	hugepageSuffix = "kB"
)

var (
	errHugepageDirName = errors.New("not a hugepage pool directory name (want hugepages-<size>kB)")
	// errNoHugetlb: /proc/meminfo shows a default-size pool but no Hugetlb
	// line (kernels before 4.16), so the pools of the other sizes are
	// unknown.
	errNoHugetlb = errors.New("no Hugetlb line (kernel before 4.16) but HugePages_Total is not 0: mount /sys/kernel/mm/hugepages under the host root")
)

// hugepagePool is where the observer reads the node's hugepage pool from.
type hugepagePool struct {
	// off: not read, as with a kubelet whose gate is off, or a node cgroup
	// other than "/" (a cgroup standing for a node has no hugepages).
	off bool
	// dir is <host root>/sys/kernel/mm/hugepages.
	dir string
	// listErr is why dir could not be listed (other than its absence); it
	// is listed again on every pass until it can be.
	listErr error
	// meminfo: dir is absent or lists no pool (a DaemonSet that mounts
	// only /sys/fs/cgroup): the pool is /proc/meminfo's Hugetlb line, the
	// same sum (hugetlb_report_meminfo adds nr_huge_pages × page size of
	// every size, the counter nr_hugepages prints).
	meminfo bool
	sizes   []hugepageSize
}

// hugepageSize is one page size's pool.
type hugepageSize struct {
	name     string // its directory's name, hugepages-2048kB
	pageSize uint64 // in bytes; 0 when name is malformed (nameErr)
	nameErr  error
	nr       file // its nr_hugepages
}

// newHugepagePool finds the pool directories. Their page sizes are fixed
// at boot, so the directory is listed once; each pass reads their counts.
func newHugepagePool(opts Options, log *zap.Logger) hugepagePool {
	p := hugepagePool{dir: filepath.Join(opts.HostRoot, hugepagesDir)}
	if opts.NoHugepageAwareEviction || opts.NodeCgroup != "/" {
		p.off = true
		return p
	}
	p.list()
	if p.meminfo && meminfoHasHugetlb(filepath.Join(opts.HostRoot, "proc/meminfo")) {
		log.Info("hugepage pool read from /proc/meminfo (Hugetlb): /sys/kernel/mm/hugepages is not under the host root or lists no pool")
	}
	return p
}

// list reads the pool directory's entries into sizes, or sets meminfo when
// it is absent or holds no pool, or listErr.
func (p *hugepagePool) list() {
	entries, err := os.ReadDir(p.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the message names the directory itself
		}
		p.listErr = err
		return
	}
	p.listErr = nil
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, hugepagePrefix) {
			continue
		}
		s := hugepageSize{name: name, nr: newFile(filepath.Join(p.dir, name, "nr_hugepages"))}
		s.pageSize, s.nameErr = parseHugepageDirName(name)
		p.sizes = append(p.sizes, s)
	}
	p.meminfo = len(p.sizes) == 0
}

func (p *hugepagePool) close(open *int) {
	for i := range p.sizes {
		p.sizes[i].nr.close(open)
	}
}

// parseHugepageDirName returns the page size, in bytes, that a pool
// directory's name gives: hugepages-2048kB is 2 MiB.
func parseHugepageDirName(name string) (uint64, error) {
	num, ok := strings.CutPrefix(name, hugepagePrefix)
	if ok {
		num, ok = strings.CutSuffix(num, hugepageSuffix)
	}
	if !ok {
		return 0, errHugepageDirName
	}
	kb, err := atou([]byte(num))
	if err != nil || kb == 0 {
		return 0, errHugepageDirName
	}
	if kb > math.MaxUint64/1024 {
		return 0, errOverflow
	}
	return kb * 1024, nil
}

// poolBytes is pages × pageSize, or errOverflow.
func poolBytes(pages, pageSize uint64) (uint64, error) {
	if pageSize != 0 && pages > math.MaxUint64/pageSize {
		return 0, errOverflow
	}
	return pages * pageSize, nil
}

// readHugepages reads the pool from the per-size nr_hugepages files, into
// ns.hugepages. A pool that cannot be read loses memory.available, with a
// SignalError naming the file and its content: a guess of 0 would hide the
// pool again, a guess of anything else would be a guess.
func (o *Observer) readHugepages(obs *Observation, ns *nodeSample) {
	p := &o.node.hugepages
	if p.off {
		ns.hugepagesOK = true
		return
	}
	if p.listErr != nil {
		p.list()
		if p.listErr != nil {
			o.signalFileErr(obs, p.dir, nil, fmt.Errorf("listing the hugepage pools: %w", p.listErr), nodeUsageSignals...)
			return
		}
	}
	if p.meminfo {
		return // readMeminfo has set it
	}
	var total uint64
	ok := true
	for i := range p.sizes {
		s := &p.sizes[i]
		if s.nameErr != nil {
			o.signalFileErr(obs, filepath.Join(p.dir, s.name), nil, s.nameErr, nodeUsageSignals...)
			ok = false
			continue
		}
		b, err := o.read(&s.nr)
		if err != nil {
			o.signalFileErr(obs, s.nr.path.String(), nil, err, nodeUsageSignals...)
			ok = false
			continue
		}
		pages, err := parseUint(b)
		var size uint64
		if err == nil {
			size, err = poolBytes(pages, s.pageSize)
		}
		if err == nil && total > math.MaxUint64-size {
			err = errOverflow
		}
		if err != nil {
			o.signalFileErr(obs, s.nr.path.String(), b, fmt.Errorf("value %s: %w", quoteContent(b), err), nodeUsageSignals...)
			ok = false
			continue
		}
		total += size
	}
	ns.hugepages, ns.hugepagesOK = total, ok
}

// meminfoHasHugetlb tells whether the kernel prints the Hugetlb line.
func meminfoHasHugetlb(p string) bool {
	b, err := os.ReadFile(p)
	return err == nil && (bytes.HasPrefix(b, []byte("Hugetlb:")) || bytes.Contains(b, []byte("\nHugetlb:")))
}

// The keys of /proc/meminfo's hugetlb lines.
var (
	meminfoHugetlb        = []byte("Hugetlb:")
	meminfoHugePagesTotal = []byte("HugePages_Total:")
)

// parseMeminfoHugetlb returns the hugepage pool from /proc/meminfo: its
// Hugetlb line, in bytes. Without that line (a kernel without hugetlb, or
// one before 4.16), the pool is 0 when HugePages_Total is 0 or absent, and
// unknown (errNoHugetlb) otherwise. On an error, line is what to show in
// the warning, as parseMeminfoSwap's.
func parseMeminfoHugetlb(b []byte) (pool uint64, line []byte, err error) {
	body, err := trimNewline(b)
	if err != nil {
		if err == errNoNewline {
			return 0, b[bytes.LastIndexByte(b, '\n')+1:], err
		}
		return 0, b, err
	}
	var defaultPages uint64
	for len(body) > 0 {
		line, body, _ = bytes.Cut(body, []byte{'\n'})
		if rest, ok := bytes.CutPrefix(line, meminfoHugetlb); ok {
			if pool, err = parseKB(rest); err != nil {
				return 0, line, err
			}
			return pool, nil, nil
		}
		if rest, ok := bytes.CutPrefix(line, meminfoHugePagesTotal); ok {
			if defaultPages, err = atou(bytes.TrimLeft(rest, " ")); err != nil {
				return 0, line, err
			}
		}
	}
	if defaultPages != 0 {
		return 0, nil, errNoHugetlb
	}
	return 0, nil, nil
}
