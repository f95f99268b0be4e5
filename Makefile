# Catena build, test and tooling entry points. Run as root for test/demo/bench;
# make test-unit runs as any user. make help lists the targets and their cost.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
BIN := $(CURDIR)/bin
CNI_BIN := $(BIN)/cni
# Static binaries: no dynamic loader on the start-up path of every CNI call.
# go build records in each binary the commit of the .git directory it finds
# above the package (vcs.revision, vcs.modified), which --version prints. A
# linked git worktree's .git is a file, which Go does not recognise: it would
# record an enclosing checkout's commit, if any, so such a tree builds with
# -buildvcs=false (commit unknown). A real checkout asks for -buildvcs=auto,
# whatever GOFLAGS the Go environment sets.
VCSFLAG := $(if $(wildcard $(CURDIR)/.git/.),-buildvcs=auto,$(if $(wildcard $(CURDIR)/.git),-buildvcs=false))
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath $(VCSFLAG) -ldflags='-s -w'
FUZZTIME ?= 30s
# e.g. make bench BENCH_FLAGS='-n 60 -docs' (see go run ./tools/bench -h)
BENCH_FLAGS ?=

# Tests find catena, the reference plugins and the test plugins here.
export CATENA_CNI_PATH := $(CNI_BIN)
export CATENA_BIN := $(BIN)
export GOTOOLCHAIN := local

.PHONY: all help build build-demo image plugins demo-deps flannel crio jaeger sbom helm manifests chart vet lint test test-unit test-integration test-k8s demo bench bench-node fuzz clean leak-demo soak

## all: the same as build
all: build

# A line "## target: what it does (cost)" above a target is its help.
## help: this list (instant)
help:
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); t = $$0; sub(/:.*/, "", t); d = $$0; sub(/^[a-z0-9-]+: */, "", d); printf "  %-17s %s\n", t, d }' $(MAKEFILE_LIST)

# $(call install_bin,DEST,PKG) builds PKG into DEST through a temp file and a
# rename: a test or a catena already running DEST keeps its inode.
install_bin = $(GOBUILD) -o $(1).tmp $(2) && mv -f $(1).tmp $(1)

# What the demo runs: catena (also in bin/cni), catenactl and the failer.
## build-demo: catena, catenactl and the failer into bin/ (no root; installs nothing; seconds warm)
build-demo:
	@mkdir -p $(CNI_BIN)
	$(call install_bin,$(BIN)/catena,./plugins/catena)
	$(call install_bin,$(BIN)/catenactl,./cmd/catenactl)
	cp -f $(BIN)/catena $(CNI_BIN)/catena.tmp && mv -f $(CNI_BIN)/catena.tmp $(CNI_BIN)/catena
	$(call install_bin,$(CNI_BIN)/failer,./plugins/testing/failer)

## build: every binary into bin/ and bin/cni/ (no root; installs nothing; seconds warm)
build: build-demo
	$(GOBUILD) -o $(BIN)/catena-agent ./cmd/catena-agent
	$(GOBUILD) -o $(CNI_BIN)/ ./plugins/testing/...

# The node image (Dockerfile) as an OCI archive, bin/catena-image.tar, built
# with Debian's buildah; the reference is in bin/catena-image.ref.
## image: the node image, bin/catena-image.tar (root; installs buildah if missing; about a minute on 2 cores)
image: build
	bash scripts/image.sh

# Everything make test needs: the demo's deps, then containerd, CRI-O,
# buildah, Kubernetes, promtool and Jaeger (30 to 60 minutes cold by the
# load on the machine: 43 min measured on a busy 2-core machine before
# CRI-O, which adds some 13 min, and Jaeger, some 10; seconds warm).
## plugins: installs everything make test needs: demo-deps, flannel, containerd, CRI-O, buildah, Kubernetes, promtool, Jaeger, cyclonedx-gomod, helm (root; 30 to 60 min cold, seconds warm)
plugins:
	bash scripts/install-deps.sh

# flannel's CNI plugin into bin/cni: from the Go module proxy when it serves
# the pinned release (proxy.golang.org does not), else from the pinned
# source beside the repo (../shared/vendor-src, or CATENA_VENDOR_SRC); with
# neither it stops at once, naming both. make plugins runs it too.
## flannel: flannel's CNI plugin into bin/cni/, from the Go module proxy or the pinned source beside the repo (no root; 6 to 15 s cold)
flannel:
	bash scripts/install-flannel.sh

# CRI-O, its pinns and its test/copyimg into bin/crio/, and conmon and runc
# from apt, for the CRI-O integration tests: from the Go module proxy when
# it serves the pinned release (proxy.golang.org does not), else from the
# pinned source beside the repo (../shared/vendor-src, or
# CATENA_VENDOR_SRC); with neither it stops at once, naming both. make
# plugins runs it too. 13 min cold measured on a loaded 2-core machine.
## crio: CRI-O (crio, pinns, copyimg) into bin/crio/, conmon and runc from apt, from the Go module proxy or the pinned source beside the repo (root; about 13 min cold on 2 cores, seconds warm)
crio:
	bash scripts/install-crio.sh

# Jaeger v2 (JAEGER_VERSION in scripts/versions.env) into bin/tools/, for
# the integration tests that read back the spans sent to it
# (integration/jaeger_test.go): built from the Go module proxy in a
# throwaway module, as Jaeger's go.mod has replace directives that go
# install refuses. make plugins runs it too. Measured on a loaded 2-core
# machine: 6 min 41 s cold with its modules already downloaded (7.5 min of
# CPU), 3 min to download them with a warm Go build cache, 20 s with both
# warm, instant once built.
## jaeger: Jaeger v2 (pinned) into bin/tools/, for the trace integration tests (no root; about 10 min cold on 2 cores, instant warm)
jaeger:
	bash scripts/install-jaeger.sh

# CycloneDX SBOMs (JSON, spec 1.6) into bin/sbom/: the module's whole
# build with its tests (catena-module.cdx.json) and each shipped binary's
# linked modules, read from its build info (<binary>.cdx.json), by
# cyclonedx-gomod (CYCLONEDX_GOMOD_VERSION in scripts/versions.env, built
# into bin/tools/ first if missing: about a minute cold). The module's,
# with each module's licence detected from its source, took 46 s on 2
# cores (7 s without -licenses); each binary's 1 s.
## sbom: CycloneDX SBOMs of the module and of catena, catenactl, catena-agent into bin/sbom/ (no root; builds; about a minute warm, a minute more cold)
sbom: $(call deps,build)
	bash scripts/install-cyclonedx.sh
	@mkdir -p $(BIN)/sbom
	$(BIN)/tools/cyclonedx-gomod mod -json -test -licenses -output $(BIN)/sbom/catena-module.cdx.json .
	for b in catena catenactl catena-agent; do \
		$(BIN)/tools/cyclonedx-gomod bin -json -output $(BIN)/sbom/$$b.cdx.json $(BIN)/$$b; done

# Helm (HELM_VERSION in scripts/versions.env) into bin/tools/, from the Go
# module proxy: 113 s cold measured on a busy 2-core machine (its modules
# to download), instant once built. make plugins runs it too.
## helm: Helm (pinned) into bin/tools/, for the chart (no root; about 2 min cold, instant warm)
helm:
	bash scripts/install-helm.sh

# deploy/catena.yaml and deploy/uninstall.yaml rendered from the chart
# (deploy/chart/catena) with its defaults; TestManifestsRendered fails when
# the committed files differ.
## manifests: renders deploy/catena.yaml and deploy/uninstall.yaml from the Helm chart (no root; seconds, once helm is built)
manifests: helm
	bash scripts/render-manifests.sh

# The chart as bin/chart/catena-<version>.tgz, the archive an OCI registry
# takes: helm push bin/chart/catena-0.1.0.tgz oci://<registry>/<repo>
## chart: packages the Helm chart into bin/chart/ (no root; seconds, once helm is built)
chart: helm
	$(BIN)/tools/helm lint --strict deploy/chart/catena
	$(BIN)/tools/helm package deploy/chart/catena --destination $(BIN)/chart

# Only what make demo runs: iptables, the reference plugins, cnitool.
## demo-deps: installs iptables (apt), the pinned reference plugins and cnitool into bin/ (root; 2 to 5 min cold, seconds warm)
demo-deps:
	bash scripts/install-demo-deps.sh

# make test is the whole suite CI runs: its prerequisites once, then each
# step's target with NODEPS=1 (their prerequisites have run), one after the
# other; scripts/test-tiers.sh stops at the first that fails and prints how
# long each took.
TEST_STEPS := vet lint test-unit test-integration test-k8s
# $(call deps,PREREQS): PREREQS, or nothing under NODEPS=1 (which the
# tests' own commands do not inherit)
deps = $(if $(NODEPS),,$(1))
unexport NODEPS

## test: the whole suite CI runs: vet, lint, test-unit, test-integration, test-k8s, then their times (root; installs what plugins does; about 35 min on 2 cores once installed)
test: plugins build image
	@MAKE='$(MAKE)' bash scripts/test-tiers.sh $(TEST_STEPS)

## vet: go vet ./... (no root; seconds warm, about a minute cold)
vet:
	$(GO) vet ./...

# golangci-lint on ./... with .golangci.yml; the pinned version
# (GOLANGCI_LINT_VERSION in scripts/versions.env) is built into bin/tools/
# first if it is not there. Measured on a shared 2-core machine (load 5 to
# 12): building it cold, 170 to 200 s; a run with no Go build or lint cache
# 155 s, with a warm Go build cache but no lint cache 35 s, warm 1 to 8 s.
# Then helm lint --strict of the chart, which checks the default values
# against its values.schema.json.
## lint: golangci-lint v2 (pinned) with .golangci.yml over the module, and helm lint of the chart (no root; builds the linter and helm into bin/tools first: about 5 min cold; seconds warm)
lint: $(call deps,helm)
	bash scripts/install-golangci-lint.sh
	$(BIN)/tools/golangci-lint run ./...
	$(BIN)/tools/helm lint --strict deploy/chart/catena

# Every package but integration/: their tests need no root, no netns and no
# runtime, and run as any user. Those that need root skip without it, but
# under CI=true they fail instead: run as root, make test runs them.
## test-unit: every package's tests but integration/ (any user; builds bin/ and helm into bin/tools; about a minute warm: 45 s measured at a load of 2 on 2 cores; some 13 min cold on a busy machine)
test-unit: $(call deps,build helm)
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/integration$$')

# The Kubernetes node test (integration/k8s_*_test.go) runs on its own, -v,
# its log in bin/k8s-test.log: its K8S-SUMMARY lines are printed, and
# when it fails the log's tail and each failed test's own output.
K8S_TEST := '^TestKubernetesNode$$'

# integration/: real reference plugins in real network namespaces,
# containerd's CRI and CRI-O's (its five tests take 25 to 40 s), the image;
# all but the Kubernetes node.
# Its -v log is bin/integration-test.log: the failures and the slowest
# tests are printed from it; when it fails, the log's tail and then each
# failed test's own output (scripts/failed-tests.sh).
## test-integration: integration/ but TestKubernetesNode: real plugins, netns, containerd, CRI-O; log in bin/integration-test.log (root; needs make plugins; about 9 min, more under load)
test-integration: $(call deps,plugins build image)
	@rc=0; $(GO) test -count=1 -timeout 40m -v -skip $(K8S_TEST) ./integration >$(BIN)/integration-test.log 2>&1 || rc=$$?; \
	grep -E '^(--- FAIL|ok|FAIL)' $(BIN)/integration-test.log || true; \
	echo "make test-integration: the slowest tests"; \
	sed -nE 's/^--- (PASS|FAIL|SKIP): ([^ ]+) \(([0-9.]+)s\)$$/\3 \2 \1/p' $(BIN)/integration-test.log | sort -rn | head -n 15 | \
	awk '{ printf "  %8.1fs  %s %s\n", $$1, $$2, ($$3 == "PASS" ? "" : $$3) }'; \
	if [ $$rc -ne 0 ]; then tail -n 100 $(BIN)/integration-test.log; bash scripts/failed-tests.sh $(BIN)/integration-test.log; fi; exit $$rc

## test-k8s: TestKubernetesNode: a real cluster, a CRI-O node's scenarios, flannel's, a 5-minute chaos soak; log in bin/k8s-test.log (root; needs make plugins; about 22 min)
test-k8s: $(call deps,plugins build image)
	@rc=0; $(GO) test -count=1 -timeout 60m -v -run $(K8S_TEST) ./integration >$(BIN)/k8s-test.log 2>&1 || rc=$$?; \
	grep -E '^(K8S-SUMMARY|SOAK figure|SOAK invariant|--- |ok|FAIL)' $(BIN)/k8s-test.log || true; \
	if [ $$rc -ne 0 ]; then tail -n 100 $(BIN)/k8s-test.log; bash scripts/failed-tests.sh $(BIN)/k8s-test.log; fi; exit $$rc

# The chaos soak alone (integration/k8s_soak*_test.go) on a fresh Kubernetes
# node: SOAK_DURATION of pod churn under random faults, SOAK_SEED to replay
# a run's schedule (printed at its start); its log in bin/soak.log, its
# fault log and figures printed. make test runs a 5-minute soak, seed
# 20261126, as the last of TestKubernetesNode's scenarios.
SOAK_DURATION ?= 60m
SOAK_SEED ?= $(shell date +%s)
# go test's bound: the soak, the bring-up (~5 min) and convergence (<= 7 min)
SOAK_TIMEOUT ?= 3h
## soak: the chaos soak alone on a fresh Kubernetes node, SOAK_DURATION (60m) of churn (root; needs make plugins; the duration and about 12 min)
soak: plugins build image
	@rc=0; CATENA_K8S_SCENARIOS=soak CATENA_SOAK_DURATION=$(SOAK_DURATION) CATENA_SOAK_SEED=$(SOAK_SEED) \
	$(GO) test -count=1 -timeout $(SOAK_TIMEOUT) \
	-v -run $(K8S_TEST) ./integration >$(BIN)/soak.log 2>&1 || rc=$$?; \
	grep -E '^(SOAK|K8S-SUMMARY|--- |ok|FAIL)' $(BIN)/soak.log || true; \
	if [ $$rc -ne 0 ]; then tail -n 100 $(BIN)/soak.log; bash scripts/failed-tests.sh $(BIN)/soak.log; fi; exit $$rc

# The node-density benchmark alone (integration/k8s_density_test.go) on a
# fresh Kubernetes node running flannel (BENCH_NODE_RUNTIME=containerd) or
# on the cluster's CRI-O node running its bridge chain (=crio):
# BENCH_NODE_ROUNDS rounds of the primary alone and as many of Catena
# installed over it (kubectl apply, uninstalled between), alternated, each
# scaling a Deployment of pause pods from 0 to each N of BENCH_NODE_N and
# back; its log in bin/bench-node.log (bin/bench-node-crio.log), its tables
# printed, its CSV files and CDF plot in bin/ (node-density*,
# node-density-crio*), the plot also in docs/ with BENCH_NODE_DOCS=1.
# make test runs one round of each with 3 pods on each node.
BENCH_NODE_N ?= 30,60
BENCH_NODE_RUNTIME ?= containerd
BENCH_NODE_ROUNDS ?= 5
BENCH_NODE_DOCS ?=
# BENCH_NODE_PERF=1 profiles each round with perf (Debian's linux-perf,
# installed if missing) into bin/perf/ and prints the CPU per pod by command
BENCH_NODE_PERF ?=
# go test's bound: the bring-up (~5 min) and the rounds
BENCH_NODE_TIMEOUT ?= 3h
## bench-node: the node-density benchmark on a fresh Kubernetes node, BENCH_NODE_RUNTIME (containerd, with flannel; or crio, with a bridge chain), BENCH_NODE_ROUNDS (5) rounds per variant at each N of BENCH_NODE_N (30,60) (root; needs make plugins; 10 min at the defaults at a load of 35 to 60 on 2 cores)
bench-node: plugins build image $(if $(filter crio,$(BENCH_NODE_RUNTIME)),crio)
	@case "$(BENCH_NODE_RUNTIME)" in containerd) scenario='node density'; log=$(BIN)/bench-node.log;; \
	crio) scenario='crio density'; log=$(BIN)/bench-node-crio.log;; \
	*) echo "bench-node: BENCH_NODE_RUNTIME is containerd or crio, not $(BENCH_NODE_RUNTIME)" >&2; exit 2;; esac; \
	if [ -n "$(BENCH_NODE_PERF)" ]; then bash -c 'log() { echo "bench-node: $$*"; }; . scripts/lib.sh; ensure_apt_pkgs linux-perf' || exit 1; fi; \
	rc=0; CATENA_K8S_SCENARIOS="$$scenario" CATENA_BENCH_NODE_N=$(BENCH_NODE_N) CATENA_BENCH_NODE_ROUNDS=$(BENCH_NODE_ROUNDS) \
	CATENA_BENCH_NODE_OUT=$(BIN) CATENA_BENCH_NODE_DOCS=$(if $(BENCH_NODE_DOCS),$(CURDIR)/docs) \
	CATENA_BENCH_NODE_PERF=$(BENCH_NODE_PERF) \
	$(GO) test -count=1 -timeout $(BENCH_NODE_TIMEOUT) \
	-v -run $(K8S_TEST) ./integration >$$log 2>&1 || rc=$$?; \
	grep -E '^(NODE-DENSITY|K8S-SUMMARY|--- |ok|FAIL)' $$log || true; \
	if [ $$rc -ne 0 ]; then tail -n 100 $$log; bash scripts/failed-tests.sh $$log; fi; exit $$rc

# The README's first command: installs and builds only what it runs, then the
# demo. Cold (no Go module or build cache) about 170 s of CPU: 95 s of wall
# time on a quiet 2-core machine, 276 s and 456 s on a shared one at load
# averages of 6 to 9 and 9 to 15; warm 6 to 10 s (2026-11-25).
## demo: the README's first command: a real chain in a throwaway netns, then the leak table (root; installs demo-deps; 95 to 456 s cold, 6 to 10 s warm)
demo: demo-deps build-demo
	bash scripts/demo.sh

## bench: the benchmark, BENCH_FLAGS (root; installs what plugins does; minutes, by its flags)
bench: plugins build
	$(GO) run ./tools/bench $(BENCH_FLAGS)

## fuzz: every Fuzz target (13) for FUZZTIME (30s) each, one after the other (no root; installs nothing; about 7 min)
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

## clean: removes bin/ (instant)
clean:
	rm -rf $(BIN)

# The second half of make demo alone: the seed failure's IP leak, with and
# without Catena, as a table.
## leak-demo: the second half of make demo alone (root; installs demo-deps; seconds warm)
leak-demo: demo-deps build-demo
	bash scripts/leak-demo.sh
