# evictd — build, test and demo targets. Everything a fresh machine needs is
# built here from the Go module proxy; nothing is downloaded any other way.

GO          ?= go
OUT         := _output
BIN         := $(OUT)/bin
TOOLS       := $(OUT)/tools
STATICCHECK := $(TOOLS)/staticcheck
STATICCHECK_VERSION := v0.8.2
# The release's version, set once in the VERSION file: the binaries (evictd --version and
# evictd_build_info), the image's name and labels, and the chart's version and appVersion (which
# test/deploy holds equal to it) all say it; the commit goes alongside as the revision.
VERSION     ?= $(shell cat VERSION)
# The commit and its date (the build date of a reproducible build: the same commit gives the same
# binary), and whether the tree had uncommitted changes.
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE  ?= $(shell git log -1 --format=%cI 2>/dev/null)
MODIFIED    ?= $(shell git diff --quiet HEAD 2>/dev/null || echo true)
LDFLAGS     := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.buildDate=$(BUILD_DATE) \
               -X main.modified=$(MODIFIED)
# Packages whose tests need the real control plane.
E2E_PKGS    := ./test/e2e/...
UNIT_PKGS    = $(shell $(GO) list ./... | grep -v '/test/e2e')
BENCH_COUNT ?= 6

export CGO_ENABLED ?= 0

.PHONY: all build observe test test-node unit e2e bench bench-latency bench-oom bench-overhead bench-scale verify fmt vet lint spdx \
        fuzz race cluster-bins node-bins demo demo-bins dashboard-picture test-dashboard image image-push image-workload test-image test-deploy clean FORCE

all: build

## build: evictd and the test binaries (workload, cluster, nodesim, demo, and the VM node's
## vmagent and pause) into _output/bin.
## One go build for all seven: their packages compile and link side by side on every core.
## The test binaries get evictd's flags too (-X main.version is ignored where unused).
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/evictd ./test/cmd/workload \
	  ./test/cmd/cluster ./test/cmd/nodesim ./test/cmd/demo ./test/cmd/vmagent ./test/cmd/pause

$(BIN)/evictd: FORCE
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/evictd

$(BIN)/workload: FORCE
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $@ ./test/cmd/workload

$(BIN)/cluster $(BIN)/nodesim $(BIN)/vmagent $(BIN)/pause: FORCE
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $@ ./test/cmd/$(notdir $@)

## observe: one observation of this host, as a table (run as root).
observe: $(BIN)/evictd
	$(BIN)/evictd observe -o table

## cluster-bins: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet and
## kubectl from hack/cluster; CLUSTER_BINS names fewer (make test's cluster-bins stage leaves the
## kubelet to node-ready, which builds it beside the e2e suite: the suite never runs it).
CLUSTER_BINS ?=
cluster-bins:
	hack/build-cluster.sh $(BIN) $(CLUSTER_BINS)

## node-bins: the VM node's containerd 2, ctr and containerd-shim-runc-v2 from hack/node.
node-bins:
	hack/build-node.sh $(BIN)

## test: the gate, what CI runs (docs/testing.md): static checks, unit tests, the end-to-end tests
## on the host's cgroup v1 against the real control plane, and the node smoke: one boot of the
## cgroup v2 VM node, evictd installed from the chart, parity and one eviction (needs root for
## apt-get and cgroups). hack/test.sh runs the stages, times each and ends with one
## "N passed, N failed" line; TEST_STAGES picks stages.
## test-node: every other test of the real node (the one-disk, imagefs and cgroupfs nodes, and
## other Kubernetes releases' smoke, KUBE_RELEASES, default 1.36.3): not in the gate; run it before
## resolving a change to what the node path reads or does. E2E_NODE_RUN=PATTERN narrows it.
test:
	hack/test.sh

test-node:
	TEST_TIER=node hack/test.sh

unit:
	$(GO) test -count=1 $(UNIT_PKGS)

## e2e: only the end-to-end tests against the real control plane.
e2e: build cluster-bins
	$(GO) test -count=1 -p 1 -v -timeout 50m $(E2E_PKGS)

## bench: observation, ranking, trace and pass benchmarks (medians over BENCH_COUNT runs).
bench:
	hack/bench.sh $(BENCH_COUNT)

## bench-latency / bench-oom: the fast-path benchmarks on real cgroups and the test cluster.
bench-latency: build cluster-bins
	hack/bench-latency.sh

bench-oom: build cluster-bins
	hack/bench-oom.sh

bench-overhead: build cluster-bins
	hack/bench-overhead.sh

## bench-scale: what SCALE_AGENTS evictd agents (default 50, each on its own simulated node) cost the
## control plane, phase by phase, beside the kubelet's heartbeat (hack/bench-scale.sh, about 15 minutes;
## SCALE_PHASES changes the phases' lengths). Not part of test. Table in _output/bench/scale.txt.
bench-scale: build cluster-bins
	hack/bench-scale.sh

## fuzz: every fuzz target for FUZZTIME (default 60s) each (hack/fuzz.sh: one instrumented test
## binary a package; a failing input is kept under the package's testdata/fuzz and fails the run).
fuzz:
	hack/fuzz.sh $(or $(FUZZTIME),60s)

## race: the race detector (go test -race, with cgo and gcc) over the packages whose state
## goroutines share, listed with why in hack/race.sh; fails on any DATA RACE report or failed test.
race:
	hack/race.sh

## verify: gofmt, go vet and staticcheck.
verify: fmt vet lint spdx

## spdx: every Go file and script says its licence (LICENSE: Apache-2.0) in an SPDX line.
spdx:
	@missing=$$(git ls-files '*.go' '*.sh' | xargs grep -L 'SPDX-License-Identifier: Apache-2.0'); \
	if [ -n "$$missing" ]; then echo "no SPDX-License-Identifier line in:"; echo "$$missing"; exit 1; fi

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags vmnode,vmnodebench ./test/vmnode/...

lint: $(STATICCHECK)
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags vmnode,vmnodebench ./test/vmnode/...

$(STATICCHECK):
	@mkdir -p $(TOOLS)
	GOBIN=$(abspath $(TOOLS)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## promtool: Debian's promtool (hack/get-promtool.sh unpacks it from the prometheus package, never
## installing it; skipped when already there), which runs the alerts' unit tests in test/deploy.
PROMTOOL := $(TOOLS)/promtool
$(PROMTOOL): FORCE
	hack/get-promtool.sh $(TOOLS)

# The real helm CLI, built from the Helm module test/deploy already requires (so its version is the
# one the chart tests render with, and its packages come from the same build cache); stamped with
# that version, which helm's own source only knows as major.minor.
HELM := $(TOOLS)/helm
$(HELM): FORCE
	@mkdir -p $(TOOLS)
	cd test/deploy && $(GO) build -trimpath -ldflags "-X helm.sh/helm/v3/internal/version.version=$$($(GO) list -m \
	  -f '{{.Version}}' helm.sh/helm/v3)" -o $(abspath $@) helm.sh/helm/v3/cmd/helm

## demo: a local real cluster, a simulated node under memory pressure, evictd at work. It builds
## only what it runs: evictd, the workload, the cluster and demo commands (one go build), and the
## three control plane binaries the demo's cluster starts.
DEMO_CLUSTER_BINS := etcd kube-apiserver kube-controller-manager
demo: demo-bins
	hack/demo.sh

demo-bins:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/evictd ./test/cmd/workload ./test/cmd/cluster ./test/cmd/demo
	hack/build-cluster.sh $(BIN) $(DEMO_CLUSTER_BINS)

## dashboard-picture: docs/images/dashboard.png, deploy/monitoring/dashboard.json drawn from the
## demo's scrapes of evictd's /metrics (hack/dashboard evaluates every panel's queries with
## Prometheus's engine). Needs root, like the demo.
DASHBOARD_SCRAPES := $(OUT)/dashboard-scrapes
dashboard-picture: demo-bins
	rm -rf $(DASHBOARD_SCRAPES)
	DEMO_SCRAPE_DIR=$(abspath $(DASHBOARD_SCRAPES)) hack/demo.sh
	@mkdir -p docs/images
	cd hack/dashboard && $(GO) run . --dashboard ../../deploy/monitoring/dashboard.json \
	  --scrapes $(abspath $(DASHBOARD_SCRAPES)) --out ../../docs/images/dashboard.png

## test-dashboard: the picture tool's tests (hack/dashboard, its own module).
test-dashboard:
	cd hack/dashboard && $(GO) test -count=1 ./...

## image: evictd's container image for linux/amd64 and linux/arm64 (an OCI image index), written
## without a Docker engine by hack/image (go-containerregistry) as _output/image/evictd-$(VERSION).tar,
## an OCI image layout in a tar (`ctr -n k8s.io images import FILE`, skopeo, crane and podman read
## it), with the OCI labels: source, revision, version, created, licences. IMAGE_PLATFORMS picks the
## architectures (IMAGE_FORMAT=docker-archive, `docker save`'s format, holds one: the first).
## image-push: the same image pushed to IMAGE (e.g. IMAGE=registry.example.com/evictd:v0.1.0), with
## the credentials `docker login` or `crane auth login` left in the Docker config.
IMAGE_DIR       := $(OUT)/image
IMAGE_TOOL      := $(TOOLS)/image
IMAGE_FORMAT    ?= oci-layout
IMAGE_PLATFORMS ?= amd64 arm64
IMAGE           ?=
IMAGE_ARCHES    := $(if $(filter docker-archive,$(IMAGE_FORMAT)),$(firstword $(IMAGE_PLATFORMS)),$(IMAGE_PLATFORMS))
IMAGE_LABELS     = --label org.opencontainers.image.source=https://github.com/evictd/evictd \
                   --label org.opencontainers.image.title=evictd \
                   --label org.opencontainers.image.version=$(VERSION) \
                   --label org.opencontainers.image.revision=$(REVISION) \
                   --label org.opencontainers.image.created=$(BUILD_DATE) \
                   --label org.opencontainers.image.licenses=Apache-2.0

image: $(IMAGE_TOOL) $(foreach a,$(IMAGE_ARCHES),$(OUT)/linux-$(a)/evictd)
	@mkdir -p $(IMAGE_DIR)
	$(IMAGE_TOOL) $(foreach a,$(IMAGE_ARCHES),--binary $(OUT)/linux-$(a)/evictd) --name evictd:$(VERSION) \
	  --format $(IMAGE_FORMAT) $(IMAGE_LABELS) --out $(IMAGE_DIR)/evictd-$(VERSION).tar

image-push: $(IMAGE_TOOL) $(foreach a,$(IMAGE_PLATFORMS),$(OUT)/linux-$(a)/evictd)
	@test -n "$(IMAGE)" || { echo "image-push: set IMAGE, e.g. IMAGE=registry.example.com/evictd:$(VERSION)" >&2; exit 2; }
	$(IMAGE_TOOL) $(foreach a,$(IMAGE_PLATFORMS),--binary $(OUT)/linux-$(a)/evictd) --name $(IMAGE) \
	  $(IMAGE_LABELS) --push

# evictd cross-compiled for one architecture (static, as everywhere).
$(OUT)/linux-%/evictd: FORCE
	GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/evictd

## image-workload: the test workload's image the same way, _output/image/workload-$(VERSION).tar.
image-workload: $(BIN)/workload $(IMAGE_TOOL)
	@mkdir -p $(IMAGE_DIR)
	$(IMAGE_TOOL) --binary $(BIN)/workload --name evictd-workload:$(VERSION) --format $(IMAGE_FORMAT) \
	  --out $(IMAGE_DIR)/workload-$(VERSION).tar

# Built for this machine even when GOOS/GOARCH cross-compile the binaries it packs.
$(IMAGE_TOOL): FORCE
	@mkdir -p $(TOOLS)
	cd hack/image && GOOS= GOARCH= $(GO) build -o $(abspath $@) .

## test-image: the image builder's tests (hack/image, its own module).
test-image:
	cd hack/image && $(GO) test -count=1 ./...

## release: what an operator pins, for the version in VERSION, in _output/release: the image for
## linux/amd64 and linux/arm64 (evictd-VERSION-image.tar, an OCI image layout in a tar, as
## `make image` writes it, named evictd:VERSION, its creation time the commit's), the packaged chart
## (evictd-VERSION.tgz, by `helm package`), the SPDX 2.3 SBOM of both binaries
## (evictd-VERSION.spdx.json, from the module list Go embeds in each: hack/sbom) and SHA256SUMS of
## the three. The chart's version and appVersion must be VERSION. Not part of make test, which
## runs it once in test/deploy (TestRelease).
RELEASE_DIR    ?= $(OUT)/release
RELEASE_ARCHES := amd64 arm64
SBOM_TOOL      := $(TOOLS)/sbom
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
.PHONY: release test-sbom
release: $(IMAGE_TOOL) $(HELM) $(SBOM_TOOL) $(foreach a,$(RELEASE_ARCHES),$(OUT)/linux-$(a)/evictd)
	@v=$$(sed -n 's/^version: *//p' deploy/helm/evictd/Chart.yaml); a=$$(sed -n 's/^appVersion: *//p' deploy/helm/evictd/Chart.yaml | tr -d '"'); \
	  if [ "$$v" != "$(VERSION)" ] || [ "$$a" != "$(VERSION)" ]; then \
	    echo "release: deploy/helm/evictd/Chart.yaml has version $$v and appVersion $$a, VERSION says $(VERSION): set both to it" >&2; exit 2; fi
	@mkdir -p $(RELEASE_DIR)
	rm -f $(RELEASE_DIR)/evictd-* $(RELEASE_DIR)/SHA256SUMS
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(IMAGE_TOOL) $(foreach a,$(RELEASE_ARCHES),--binary $(OUT)/linux-$(a)/evictd) \
	  --name evictd:$(VERSION) --format oci-layout $(IMAGE_LABELS) --out $(RELEASE_DIR)/evictd-$(VERSION)-image.tar
	$(HELM) package deploy/helm/evictd --destination $(RELEASE_DIR)
	$(SBOM_TOOL) --name evictd --version $(VERSION) --created $(BUILD_DATE) --out $(RELEASE_DIR)/evictd-$(VERSION).spdx.json \
	  $(foreach a,$(RELEASE_ARCHES),$(OUT)/linux-$(a)/evictd)
	cd $(RELEASE_DIR) && sha256sum evictd-$(VERSION)-image.tar evictd-$(VERSION).tgz evictd-$(VERSION).spdx.json > SHA256SUMS

$(SBOM_TOOL): FORCE
	@mkdir -p $(TOOLS)
	cd hack/sbom && GOOS= GOARCH= $(GO) build -o $(abspath $@) .

## test-sbom: the SBOM writer's tests (hack/sbom, its own module).
test-sbom:
	cd hack/sbom && $(GO) test -count=1 ./...

## test-deploy: the Helm chart, the alerting rules and the dashboard (test/deploy, its own module,
## so the main module never depends on Helm or Prometheus): renders, rule and query checks, and a
## server-side dry run of the chart's objects on the test control plane.
test-deploy: cluster-bins $(STATICCHECK) $(HELM) $(PROMTOOL)
	cd test/deploy && $(GO) vet ./... && $(abspath $(STATICCHECK)) ./...
	cd test/deploy && $(GO) test -count=1 -timeout 10m ./...

clean:
	rm -rf $(OUT)

FORCE:

## vm-smoke: evictd observe on a real cgroup v2 kernel under QEMU: hack/vm/prepare.sh
## installs QEMU and fetches a Debian kernel (apt-get, as root) into _output/vm, then the
## test boots it. make test-node runs the same test among the node's; this target is the quick one.
VM_DIR := $(OUT)/vm

.PHONY: vm-smoke e2e-node e2e-node-smoke bench-latency-node bench-race-node bench-stall-node bench-shadow-node bench-peers node-ready node-images node-filler-image
vm-smoke: $(BIN)/evictd $(BIN)/workload
	hack/vm/prepare.sh $(VM_DIR)
	EVICTD_VM_DIR=$(abspath $(VM_DIR)) $(GO) test -count=1 -tags vmnode -v -timeout 15m -run TestVMCgroupV2Observe ./test/vmnode

## test-host-v2: the host tiers' memory tests on a cgroup v2-only host (hack/vm/host-v2.sh): the
## unit tests of the packages that touch cgroups and the host e2e tests that read the simulated
## node's memory files, as root with CI=true in the cgroup v2 VM guest. The go test -json stream is
## _output/host-v2/host-v2.json, counted here by testreport (a skip is a failure). Needs root.
## HOST_V2_PARTS=unit (or e2e) runs one part; HOST_V2_E2E_RUN=all the whole e2e suite.
.PHONY: test-host-v2
test-host-v2:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/testreport ./test/cmd/testreport
	rc=0; hack/vm/host-v2.sh $(OUT)/host-v2 || rc=$$?; \
	  $(BIN)/testreport --quiet --ci $$(cat $(OUT)/host-v2/expect-run 2>/dev/null) < $(OUT)/host-v2/host-v2.json && exit $$rc

## e2e-node: the old name of test-node.
NODE_IMAGES := $(IMAGE_DIR)/node
e2e-node: test-node

## e2e-node-smoke: evictd against one other Kubernetes release on the VM node (make test-node
## runs it for each of KUBE_RELEASES, as its node-VERSION stages): with KUBE_VERSION=1.35.4, hack/build-cluster-version.sh builds that release's
## etcd, control plane and kubelet into _output/bin-v1.35.4 (evictd and the test binaries stay the
## main module's, with its k8s.io clients), and TestNodeParity and one eviction
## (TestNodeProtectedPods) run against them; without KUBE_VERSION, the same on _output/bin. Needs
## root, like test-node. The output is also in _output/e2e-node-smoke-VERSION.log.
KUBE_VERSION ?=
SMOKE_VERSION  = $(or $(KUBE_VERSION:v%=%),default)
SMOKE_KUBE_BIN = $(if $(KUBE_VERSION),$(OUT)/bin-v$(KUBE_VERSION:v%=%),$(BIN))
SMOKE_TESTS   := ^(TestNodeParity|TestNodeProtectedPods)$$
e2e-node-smoke: node-images
	$(if $(KUBE_VERSION),hack/build-cluster-version.sh $(KUBE_VERSION) $(SMOKE_KUBE_BIN),hack/build-cluster.sh $(BIN))
	@{ date -u +'started %Y-%m-%d %H:%M:%S UTC'; \
	  echo "evictd $(VERSION), k8s.io/client-go $$($(GO) list -m -f '{{.Version}}' k8s.io/client-go)"; \
	  echo "control plane: $$($(SMOKE_KUBE_BIN)/kube-apiserver --version), $$($(SMOKE_KUBE_BIN)/etcd --version | head -1)"; \
	  echo "node: $$($(SMOKE_KUBE_BIN)/kubelet --version), $$($(BIN)/containerd --version)"; \
	} | tee $(OUT)/e2e-node-smoke-$(SMOKE_VERSION).log
	EVICTD_KUBE_BIN_DIR=$(abspath $(SMOKE_KUBE_BIN)) EVICTD_VM_DIR=$(abspath $(VM_DIR)) $(GO) test -count=1 \
	  -tags vmnode -v -timeout 25m -run '$(SMOKE_TESTS)' ./test/vmnode 2>&1 | tee -a $(OUT)/e2e-node-smoke-$(SMOKE_VERSION).log

# The node benchmarks and the smoke keep go test's exit status through tee.
bench-race-node bench-stall-node e2e-node-smoke: SHELL := /bin/bash
bench-race-node bench-stall-node e2e-node-smoke: .SHELLFLAGS := -o pipefail -c

## bench-race-node: TestNodeHeadToHead with the kubelet-alone runs after evictd's (the fill rates
## against the kubelet's own eviction manager; they assert nothing and can livelock the guest, so
## make test runs only evictd's, and those at two of the three rates). The table is in
## _output/bench/race-node.log.
bench-race-node: node-ready
	@mkdir -p $(OUT)/bench
	EVICTD_RACE_ALONE=1 EVICTD_VM_DIR=$(abspath $(VM_DIR)) $(GO) test -count=1 -tags vmnode -v -timeout 90m \
	  -run '^TestNodeHeadToHead$$' ./test/vmnode 2>&1 | tee $(OUT)/bench/race-node.log

## bench-stall-node: TestNodeStallLatency, stall start to eviction with PSI wake-ups against
## polling every 10 s, on the imagefs node. The table is in _output/bench/stall-node.log.
bench-stall-node: node-ready node-filler-image
	@mkdir -p $(OUT)/bench
	EVICTD_VM_DIR=$(abspath $(VM_DIR)) $(GO) test -count=1 -tags vmnode,vmnodebench -v -timeout 40m \
	  -run '^TestNodeStallLatency$$' ./test/vmnode 2>&1 | tee $(OUT)/bench/stall-node.log

## bench-shadow-node: TestNodeShadow, evictd in shadow mode beside the real kubelet, which alone
## evicts during a leak (docs/shadow.md); not part of test: the kubelet alone can livelock the
## guest. The report is in _output/bench/shadow-node.log.
bench-shadow-node: node-ready node-filler-image
	@mkdir -p $(OUT)/bench
	EVICTD_VM_DIR=$(abspath $(VM_DIR)) $(GO) test -count=1 -tags vmnode,vmnodebench -v -timeout 40m \
	  -run '^TestNodeShadow$$' ./test/vmnode 2>&1 | tee $(OUT)/bench/shadow-node.log

## bench-peers: TestNodePeers, evictd against what operators deploy instead (issue 35): each
## scenario under the kubelet alone, earlyoom (Debian's defaults, and tuned), systemd-oomd on
## kubepods.slice, evictd and evictd with --actuator, on the systemd VM node; one run each (about
## 100 s a run, an hour for the 36), outside make test (the kubelet alone and the peers can
## livelock the guest). The table is _output/bench/peers-node.txt (docs/performance.md), the log
## peers-node.log; EVICTD_PEERS_ONLY=NAME,NAME runs those configurations in that order, EVICTD_PEERS_SCENARIOS=2,3
## the scenarios of those numbers (issue 35's), EVICTD_PEERS_NODE=swap the node with swap, where
## systemd-oomd's ManagedOOMSwap watches (table peers-node-swap.txt). Each run also reads its
## daemon's own RSS and CPU, idle and over the run (the table's second part);
## EVICTD_PEERS_PODS=110 reads them at the kubelet's pod ceiling: small filler pods top the node
## up to 110 pods with the scenario's and evictd's (give the guest room for them with
## EVICTD_NODE_MEMORY_MIB=4096).
bench-peers: node-ready
	@mkdir -p $(OUT)/bench
	EVICTD_VM_DIR=$(abspath $(VM_DIR)) EVICTD_BENCH_OUT=$(abspath $(OUT)/bench) $(GO) test -count=1 -tags vmnode,vmnodebench -v \
	  -timeout 300m -run '^TestNodePeers$$' ./test/vmnode 2>&1 | tee $(OUT)/bench/peers-node.log

## bench-latency-node: the v2 fast path's detection latency on that node, per wake-up
## configuration against the timer alone; not part of test. Table in
## _output/bench/latency-node.txt.
bench-latency-node: node-ready node-filler-image
	EVICTD_VM_DIR=$(abspath $(VM_DIR)) hack/vm/bench-latency-node.sh

# node-ready: the guest's kernel and packages, the node's images, and the control plane and
# kubelet of _output/bin; node-images: all but the control plane and kubelet.
node-ready: cluster-bins node-images

node-images: build node-bins $(IMAGE_TOOL)
	hack/vm/prepare.sh $(VM_DIR)
	@mkdir -p $(NODE_IMAGES)
	$(IMAGE_TOOL) --binary $(BIN)/evictd --name evictd:e2e-node --out $(NODE_IMAGES)/evictd.tar >/dev/null
	$(IMAGE_TOOL) --binary $(BIN)/workload --name evictd-workload:e2e-node --out $(NODE_IMAGES)/workload.tar >/dev/null
	$(IMAGE_TOOL) --binary $(BIN)/pause --name evictd-pause:e2e-node --user 65535:65535 --out $(NODE_IMAGES)/pause.tar >/dev/null
	@# The ballast: an image no pod runs, 256 MiB of random bytes after the pause binary (kept
	@# incompressible), for the node test of the kubelet's image garbage collection. Made once.
	@test -s $(NODE_IMAGES)/ballast.tar || { cat $(BIN)/pause > $(NODE_IMAGES)/ballast && \
	  head -c 256M /dev/urandom >> $(NODE_IMAGES)/ballast && chmod +x $(NODE_IMAGES)/ballast && \
	  $(IMAGE_TOOL) --binary $(NODE_IMAGES)/ballast --name evictd-ballast:e2e-node \
	    --out $(NODE_IMAGES)/ballast.tar >/dev/null && rm -f $(NODE_IMAGES)/ballast; }

# node-filler-image: the latency bench's filler, which the node imports when TestNodeLatency
# (vmnodebench) runs.
node-filler-image: $(BIN)/filler $(IMAGE_TOOL)
	$(IMAGE_TOOL) --binary $(BIN)/filler --name evictd-filler:e2e-node --out $(NODE_IMAGES)/filler.tar >/dev/null

$(BIN)/filler: FORCE
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $@ ./test/bench/filler
