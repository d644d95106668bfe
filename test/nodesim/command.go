// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// WorkloadCommand is the command name that stands for the workload binary
// (Options.WorkloadBin) in a container's command. A container without a
// command runs the workload binary too: it plays every image's entrypoint.
const WorkloadCommand = "workload"

// WorkloadDirEnv is set, for each container, to the host path of the first
// emptyDir volume it mounts; the workload writes there by default.
const WorkloadDirEnv = "WORKLOAD_DIR"

// argv is what a container runs: its command and args with $(VAR)
// references expanded from its environment, as the kubelet does, and the
// workload binary put in for an empty command or one named "workload".
// Anything else runs as given, looked up in PATH.
func argv(c *corev1.Container, workloadBin string, env map[string]string) []string {
	var out []string
	cmd := c.Command
	switch {
	case len(cmd) == 0:
		out = []string{workloadBin}
	case cmd[0] == WorkloadCommand || filepath.Base(cmd[0]) == WorkloadCommand:
		out = []string{workloadBin}
		cmd = cmd[1:]
	}
	for _, s := range append(append([]string{}, cmd...), c.Args...) {
		out = append(out, expand(s, env))
	}
	return out
}

// expand resolves $(NAME) from env and turns $$ into $. A reference to an
// unknown name stays as written, like the kubelet's expansion.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// podFacts are the values the downward API and the environment draw on.
type podFacts struct {
	hostIP, podIP string
	emptyDirs     map[string]string // volume name -> host path
}

// containerEnv builds the container's environment: a base PATH and
// HOSTNAME, the pod's emptyDir paths, then the container's own env in order
// (plain values, $(VAR) expanded against what came before, and downward-API
// field references). Other sources (Secrets, ConfigMaps, resources) are not
// simulated and are left out.
func containerEnv(pod *corev1.Pod, c *corev1.Container, f podFacts) map[string]string {
	env := map[string]string{
		"PATH":     "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME": pod.Name,
	}
	for _, m := range c.VolumeMounts {
		p, ok := f.emptyDirs[m.Name]
		if !ok {
			continue
		}
		if _, set := env[WorkloadDirEnv]; !set {
			env[WorkloadDirEnv] = p
		}
	}
	fields := map[string]string{
		"metadata.name":           pod.Name,
		"metadata.namespace":      pod.Namespace,
		"metadata.uid":            string(pod.UID),
		"spec.nodeName":           pod.Spec.NodeName,
		"spec.serviceAccountName": pod.Spec.ServiceAccountName,
		"status.hostIP":           f.hostIP,
		"status.podIP":            f.podIP,
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			if v, ok := fields[e.ValueFrom.FieldRef.FieldPath]; ok {
				env[e.Name] = v
			}
		}
	}
	return env
}

// envList turns env into KEY=VALUE pairs in a stable order.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
