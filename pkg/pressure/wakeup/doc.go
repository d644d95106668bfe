// SPDX-License-Identifier: Apache-2.0

// Package wakeup tells the agent loop when to look at memory again: one epoll
// set holds every event-driven source the kernel offers, and an adaptive poll
// interval covers the rest.
//
// Sources, each armed and failing over on its own (a source that cannot be
// armed is logged with the reason and reported inactive, and the agent relies
// on polling for it):
//
//   - memcg_threshold (cgroup v1): cgroup.event_control + an eventfd on
//     memory.usage_in_bytes of a cgroup directory (the node's root memcg and
//     kubepods). The kernel signals when usage crosses the armed value in
//     either direction, at the crossing. ThresholdUsage turns an eviction
//     threshold into that usage value; it drifts with inactive_file, so the
//     caller re-arms when NeedRearm says so. The registration is
//     containerd/cgroups' cgroup1 RegisterMemoryEvent; the eventfd it returns
//     is this package's to poll and close.
//   - memory_events (cgroup v2): inotify IN_MODIFY on kubepods'
//     memory.events.local (or, before kernel 5.2, memory.events). The kernel
//     rate-limits these to 100 per second per file and defers rather than
//     drops the rest. Each notification is read, and only a rise of a counter
//     that means kubepods' own pressure wakes the agent (a pod hitting its
//     own limit bumps kubepods' hierarchical memory.events too, and is not
//     node pressure; see events.go); at most one wake-up per
//     Options.MemoryEventsInterval, with the rises in between delivered as one
//     when it ends. cgroupfs sends no inotify event when a cgroup is removed,
//     so the caller calls EventsWatch.Rearm after each observation to notice
//     a removed or re-created kubepods and watch its new file. This watch is
//     not containerd/cgroups' cgroup2 EventChan, which cannot be stopped and
//     reports only the hierarchical memory.events (libevents_linux_test.go).
//   - psi: a PSI trigger on /proc/pressure/memory or <cgroup>/memory.pressure,
//     signalled as EPOLLPRI. Without CAP_SYS_RESOURCE, kernels since 6.5 only
//     accept windows that are multiples of 2 s (other windows fail with
//     EINVAL) and evaluate such triggers on the 2 s averaging clock. Such an
//     unprivileged trigger has two pitfalls this package handles or exposes:
//     its first event can be spurious (the trigger's window is seeded from a
//     different counter than it is compared against), so that event is
//     swallowed; and reading any pressure file of the same group from a
//     polling loop advances the group's averaging clock so the trigger is
//     never evaluated, so such groups are reported by PressureReadable and the
//     caller must not read them in its loop.
//     The kernel reports POLLERR on a trigger whose cgroup was removed, or
//     nothing if the cgroup is created again first; the caller calls
//     PSIWatch.Rearm after each observation to arm a trigger on the new
//     group's file.
//   - poll: Wait's timeout expired; the caller sizes that timeout with
//     PollPolicy.Next.
//
// The package takes absolute file and directory paths (the caller resolves
// them under its host root) and an injected clock for wake-up timestamps.
package wakeup
