// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// effectiveConfigMsg is the line kubelet 1.37 logs at every start, after
// its flags, config file and drop-ins are merged and before it validates
// them (cmd/kubelet/app/server.go): the effective KubeletConfiguration as
// /configz serves it, as one klog value over several lines.
const effectiveConfigMsg = `"Effective KubeletConfiguration" config=<`

// KubeletEviction is what evictd reads of a KubeletConfiguration.
type KubeletEviction struct {
	EvictionHard                map[string]string `json:"evictionHard"`
	ImageGCHighThresholdPercent *int32            `json:"imageGCHighThresholdPercent"`
	ImageGCLowThresholdPercent  *int32            `json:"imageGCLowThresholdPercent"`
}

// EffectiveKubeletConfigs returns the eviction settings of every
// effective configuration in a kubelet's log, one for each start, in
// order. klog writes a value with line breaks as key=<, then each line
// after a tab, then " >" (k8s.io/klog/v2's writeStringValue).
func EffectiveKubeletConfigs(log []byte) ([]KubeletEviction, error) {
	var out []KubeletEviction
	s := bufio.NewScanner(bytes.NewReader(log))
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var block *strings.Builder
	n := 0
	for s.Scan() {
		line := s.Text()
		n++
		switch {
		case block == nil && isKlogHeader(line, 'I') && strings.HasSuffix(line, effectiveConfigMsg):
			block = &strings.Builder{}
		case block == nil:
		case line == " >":
			var e KubeletEviction
			if err := yaml.Unmarshal([]byte(block.String()), &e); err != nil {
				return nil, fmt.Errorf("the effective configuration ending at line %d: %w", n, err)
			}
			out = append(out, e)
			block = nil
		case strings.HasPrefix(line, "\t"):
			block.WriteString(line[1:] + "\n")
		default:
			return nil, fmt.Errorf("line %d in an effective configuration: %q has no tab", n, line)
		}
	}
	if block != nil {
		return nil, fmt.Errorf("the last effective configuration has no end (\" >\")")
	}
	return out, s.Err()
}
