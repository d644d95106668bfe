// SPDX-License-Identifier: Apache-2.0

// Package bench holds evictd's fast-path benchmarks: detection
// latency, the OOM race against a growing pod, and the agent's own CPU and
// memory overhead; and the scale benchmark, what many agents cost the
// control plane (TestScale), and what the opt-in own-node eviction policy
// costs the API server (TestOwnNodeCost). They run evictd as a real process against the
// real test control plane (test/e2e/framework) and simulated nodes on real
// cgroup v1 (test/nodesim), so they need root and the built binaries, and
// each takes minutes.
//
// The benchmark tests run only when EVICTD_BENCH=1; otherwise they skip, so
// `make test` compiles and vets them but does not wait for them. The scripts
// hack/bench-latency.sh, hack/bench-oom.sh, hack/bench-overhead.sh and
// hack/bench-scale.sh set it and print the result tables. Goal misses are reported in the tables, never
// as test failures: a benchmark fails only when its infrastructure does
// (cluster, node, agent start, a pod that never runs).
//
// Environment:
//
//	EVICTD_BENCH=1           run the benchmarks
//	EVICTD_BENCH_OUT=DIR     write each result table (<name>.txt) and evictd's
//	                         logs (<name>-<config>-evictd.log) there
//	EVICTD_BENCH_TRIALS=N    trials per configuration (latency default 20,
//	                         OOM race default 3)
//	EVICTD_BENCH_CONFIGS=a,b only these configurations (names as in the tables)
//	EVICTD_BENCH_RATES=a,b   OOM race fill rates in MiB/s (default 100,300,1000)
//	EVICTD_BENCH_PHASE=D     overhead: length of each measured phase (default 60s)
//	EVICTD_BENCH_REST=D      latency: rest before each step (default 3s, longer
//	                         than evictd's 2 s fill-rate window)
//	EVICTD_BENCH_AGENTS=N    scale: agents, one per simulated node (default 50)
//	EVICTD_BENCH_SCALE_PHASES=idle=3m,restart=60s
//	                         scale: phase lengths (ParseScalePhases)
//	EVICTD_BENCH_OWNNODE_PODS=1000,5000,20000
//	                         own-node policy cost (TestOwnNodeCost): pod counts
//
// The pure parts (statistics, /proc parsing, audit log parsing, evictd log
// parsing, metric deltas, request rates, tables) are in the non-test files and have their own unit tests,
// which always run.
package bench
