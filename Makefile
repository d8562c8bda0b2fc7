# rackpool — the two commands that matter are `make run` and `make test`.
GO      ?= go
BIN     := bin/rackpool
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# go.mod names the Go version; an older installed Go fetches it.
export GOTOOLCHAIN ?= auto

.PHONY: help setup build run test test-short check bench bench-cache bench-sim bench-scaling bench-drives bench-provision bench-pager bench-southbound bench-dra bench-slurm bench-api bench-power bench-console ui ui-check e2e clean conformance

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/rackpool
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/rackpool

run: build ## build and serve the built-in example rack with SQLite state in ./data
	./$(BIN) serve --addr 127.0.0.1:8080 --data ./data

setup: ## install what the tests need, once (Debian packages, Go modules, the Python and npm tools); make test runs it
	scripts/setup.sh

test: setup ui-check ## set up, then run every test (unit tests under -race, end-to-end tests incl. the console in Chromium, benchmarks once, DMTF conformance) and check that nothing was left behind
	GO=$(GO) scripts/test.sh

conformance: ## DMTF Redfish service, protocol and interop validators (reports in build/conformance)
	GO=$(GO) scripts/conformance.sh

test-short: ## unit tests only, no race detector, no end-to-end
	$(GO) test -short -count=1 ./...

check: ## gofmt, go vet, staticcheck, go mod tidy leaves no diff
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

bench: build ## run the composition benchmark and print the table for docs/benchmarks.md
	$(GO) run ./bench/compose

bench-cache: ## rackpool cache against memcached and extstore, P0 Fig. 9/10 (docs/benchmarks.md; tens of minutes)
	bench/cache/run.sh

bench-sim: ## rackpool sim against CloudSim Plus on the same trace, and the 10^6-request run (docs/benchmarks.md)
	bench/sim/run.sh

bench-drives: build ## blocknode and drive connect against nbdkit 1.32 with fio, and failover over 20 kills and 20 SIGSTOPs (docs/benchmarks.md; minutes)
	$(GO) run ./bench/drives -bin $(BIN) -out build/bench-drives

bench-southbound: build ## the redfish driver against fabric-emulator and a vendor composer, beside the DMTF Python Redfish library (docs/benchmarks.md)
	scripts/pyenv.sh
	$(GO) run ./bench/southbound -bin $(BIN) -out build/bench-southbound

bench-dra: build ## the Kubernetes DRA driver: allocation to binding condition, release, pool changes to slices (docs/benchmarks.md)
	$(GO) run ./bench/dra -bin $(BIN) -out build/bench-dra

bench-slurm: build ## Slurm's power saving through rackpool: sbatch to running, cold and warm, and rackpool's share (docs/slurm.md; minutes)
	$(GO) run ./bench/slurm -bin $(BIN) -out build/bench-slurm

bench-api: build ## collections at 10^4, 10^5 blocks and the P4 pod: pages, $expand, $filter, nextLink (docs/benchmarks.md; minutes)
	$(GO) run ./bench/api -bin $(BIN) -out build/bench-api

bench-power: ## ComputerSystem.Reset, Boot PATCH and GET through serve beside sushy-emulator's fake driver, 1 and 4 clients (docs/benchmarks.md)
	scripts/pyenv.sh
	$(GO) run ./bench/power

bench-provision: ## provisioning policies on the synthetic and recorded traces, forecast cost against statsmodels (docs/provisioning.md)
	scripts/pyenv.sh
	$(GO) run ./bench/provision -out docs

bench-pager: ## paging to pooled memory: sort and random table at 100/75/50/25% local, over TCP and from a mapped lease, against all local and a swap file (docs/paging.md; minutes, root for swap)
	bench/pager/run.sh

bench-scaling: ## placement cost and peak RSS against MONet pod size, 10^3..10^5 cards (docs/benchmarks.md; minutes)
	$(GO) run ./bench/scaling -out docs

ui: ui/node_modules/.rackpool-lock ## rebuild the web console (ui/ -> internal/console/dist, committed) with the pinned npm packages
	cd ui && node build.mjs

# npm ci only when ui/package-lock.json changed since the last install.
ui/node_modules/.rackpool-lock: ui/package-lock.json
	cd ui && npm ci --no-audit --no-fund --loglevel=error
	cp ui/package-lock.json $@

ui-check: ui ## rebuild the console and fail if the committed bundle differs from its sources
	@git diff --exit-code --stat internal/console/dist || { echo "internal/console/dist is stale: run make ui and commit it"; exit 1; }

bench-console: ui ## the console's first paint: topology at 10^4, 10^5 blocks and the P4 pod, blocks list at 10^5 and the pod (docs/benchmarks.md)
	RACKPOOL_E2E=1 RACKPOOL_CONSOLE_PAINT=1 $(GO) test -count=1 -timeout 20m -run 'TestConsolePaint' -v ./e2e/ | grep -E 'blocks:|ok|FAIL'
	cat build/console/paint.json

clean: ## remove build output and the default state directory
	rm -rf bin data
