# dtq's single entry point: `make help` lists the targets.

GO      ?= go
# golangci-lint runs pinned through go run: not a dependency in go.mod.
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
BIN     ?= bin/dtq
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/dtq-io/dtq/internal/buildinfo.version=$(VERSION) \
	-X github.com/dtq-io/dtq/internal/buildinfo.revision=$(REVISION)
# Every Go module in the tree (docs/architecture.md, "Modules"): the library
# at the root, the dtq command, the optional dtqprom, dtqotel and dtqoutbox,
# bench's tools, release's tool (make release) and the Helm chart's tests.
MODULES := . cmd/dtq dtqprom dtqotel dtqoutbox bench release deploy/helm
# bench's tools are vetted but not held to golangci-lint.
LINT_MODULES := $(filter-out bench,$(MODULES))
# in_modules runs $(1) in each module of $(2) (default: MODULES), the rest
# after a failure too, and fails if any run failed.
in_modules = fail=0; for m in $(or $(2),$(MODULES)); do echo "== $$m"; (cd $$m && $(1)) || fail=1; done; exit $$fail

.DEFAULT_GOAL := help
.PHONY: help dev test race bench lint build image release

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-7s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

dev: build ## Build bin/dtq and run the all-in-one local setup (bin/dtq dev; DEV_ARGS adds flags)
	./$(BIN) dev $(DEV_ARGS)

test: ## Run every test with the race detector, module by module (needs redis-server on PATH)
	@$(call in_modules,$(GO) test -race -count=1 ./...)

race: ## Run every test with the race detector, three times over
	@$(call in_modules,$(GO) test -race -count=3 ./...)

bench: ## Go benchmarks, the dtq/asynq comparison (bench/, medians of 3 runs), workflow release latency (5 joins of 10,000 deps, 100 chains; single Redis and Cluster), HTTP with wrk and script instruction counts when wrk and valgrind are installed (several minutes)
	@$(call in_modules,$(GO) test -run=^$$ -bench=. -benchmem ./...)
	cd bench && $(GO) run . -compare 3 -n 50000
	cd bench && $(GO) run . -workflow-join 10000 -rounds 5 -chains 100 && $(GO) run . -workflow-join 10000 -rounds 5 -chains 100 -cluster
	@if command -v wrk >/dev/null; then bench/wrk.sh 3 && bench/wrk.sh 3 keyed; else echo "bench: wrk not installed (apt-get install -y wrk): HTTP skipped"; fi
	@if command -v valgrind >/dev/null; then bench/scriptcost.sh; else echo "bench: valgrind not installed (apt-get install -y valgrind): instruction counts skipped"; fi

lint: ## Check formatting (gofmt), then run go vet in every module and golangci-lint (.golangci.yaml) in all but bench/
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@$(call in_modules,$(GO) vet ./...)
	@$(call in_modules,$(GOLANGCI_LINT) run ./...,$(LINT_MODULES))

build: ## Build bin/dtq (from cmd/dtq, the dtq command's module)
	cd cmd/dtq && $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(abspath $(BIN)) .

image: ## Build the container image dtq:$(VERSION) from the Dockerfile (needs docker)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t dtq:$(VERSION) .

# Where make release writes, emptied first. The commit's time stamps the
# image, so that the same commit gives the same image. RELEASE_FLAGS adds
# the tool's flags (cd release && go run . -help), such as -certs=/abs/ca.pem.
DIST ?= dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
RELEASE_FLAGS ?=

release: ## Build a release into dist/ (VERSION=v0.x.y): dtq for linux and darwin on amd64 and arm64, the OCI image without Docker, SHA256SUMS (docs/install.md)
	rm -rf $(DIST)
	cd release && $(GO) run . -version $(VERSION) -revision $(REVISION) -source-date-epoch $(SOURCE_DATE_EPOCH) -out $(abspath $(DIST)) -go $(GO) $(RELEASE_FLAGS)

# test-compat's servers, name=/path/to/server each, space separated.
SERVERS ?=
# COMPAT_FLAGS adds go test flags to test-compat's runs (e.g. -race).
COMPAT_FLAGS ?=

.PHONY: test-compat
test-compat: ## Run the root, rdb, fault and Cluster suites against each server in SERVERS="name=/path/to/valkey-server ..." (docs/compatibility.md); not part of make test
	@GO="$(GO)" COMPAT_FLAGS="$(COMPAT_FLAGS)" internal/redistest/compat.sh $(SERVERS)

.PHONY: test-partitions
test-partitions: ## Run the network-fault suite alone, its random scenario for 10 minutes (needs root, iproute2, nftables; docs/reliability.md)
	@log=$$(mktemp); cd cmd/dtq && $(GO) test -race -count=1 -timeout 40m -v ./internal/partitionsuite -partitions.random=10m >$$log 2>&1; \
	status=$$?; grep -E '^(scenario|--- |FAIL|ok)|seed=' $$log; [ $$status -eq 0 ] || echo "full output: $$log"; exit $$status

.PHONY: screenshots
screenshots: ## Regenerate the dashboard screenshots in docs/img (needs chromium and redis-server)
	cd cmd/dtq && $(GO) test ./internal/web -run '^TestScreenshots$$' -count=1 -screenshots
