# Catena build, test and tooling entry points. Run as root for test/demo/bench.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
BIN := $(CURDIR)/bin
CNI_BIN := $(BIN)/cni
# Static binaries: no dynamic loader on the start-up path of every CNI call.
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w'
FUZZTIME ?= 30s
# e.g. make bench BENCH_FLAGS='-n 60 -docs' (see go run ./scripts/bench -h)
BENCH_FLAGS ?=

# Tests find catena, the reference plugins and the test plugins here.
export CATENA_CNI_PATH := $(CNI_BIN)
export CATENA_BIN := $(BIN)
export GOTOOLCHAIN := local

.PHONY: all build image plugins test demo bench fuzz clean leak-demo

all: build

build:
	@mkdir -p $(CNI_BIN)
	$(GOBUILD) -o $(BIN)/catena ./plugins/catena
	@if [ -d cmd/catenactl ]; then \
		echo "$(GOBUILD) -o $(BIN)/catenactl ./cmd/catenactl"; \
		$(GOBUILD) -o $(BIN)/catenactl ./cmd/catenactl; \
	fi
	$(GOBUILD) -o $(BIN)/catena-agent ./cmd/catena-agent
	cp -f $(BIN)/catena $(CNI_BIN)/catena.tmp && mv -f $(CNI_BIN)/catena.tmp $(CNI_BIN)/catena
	$(GOBUILD) -o $(CNI_BIN)/ ./plugins/testing/...

# The node image (Dockerfile) as an OCI archive, bin/catena-image.tar, built
# with Debian's buildah; the reference is in bin/catena-image.ref.
image: build
	bash scripts/image.sh

plugins:
	bash scripts/install-deps.sh

# The Kubernetes node test (integration/k8s_*_test.go) runs on its own, -v,
# its log in bin/k8s-test.log: its K8S-SUMMARY lines are printed, and the
# log's tail when it fails.
K8S_TEST := '^TestKubernetesNode$$'

test: plugins build image
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m -skip $(K8S_TEST) ./...
	@rc=0; $(GO) test -count=1 -timeout 30m -v -run $(K8S_TEST) ./integration >$(BIN)/k8s-test.log 2>&1 || rc=$$?; \
	grep -E '^(K8S-SUMMARY|--- |ok|FAIL)' $(BIN)/k8s-test.log || true; \
	if [ $$rc -ne 0 ]; then tail -n 150 $(BIN)/k8s-test.log; fi; exit $$rc

demo: plugins build
	bash scripts/demo.sh

bench: plugins build
	$(GO) run ./scripts/bench $(BENCH_FLAGS)

fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

clean:
	rm -rf $(BIN)

leak-demo: plugins build
	bash scripts/leak-demo.sh
