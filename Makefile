# ax — build, run and test. `make run` and `make test` are all a newcomer needs.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
PKGS  := ./contracts/... ./events/... ./infra/... ./services/...
# Packages whose concurrency is tested under the race detector (all of them).
RACE_PKGS := $(PKGS)

.PHONY: all build run test test-grants test-short vet check-tree bench chaos servers tools clean FORCE

all: build

build: $(BIN)/ax

# The first build on a cold machine downloads and compiles every dependency
# (several minutes with nothing printed by go), so say what is happening.
$(BIN)/ax: FORCE
	@echo "building $(BIN)/ax (the first build downloads and compiles all dependencies and can take several minutes; later builds take seconds)"
	cd services && $(GO) build -o ../$(BIN)/ax ./cmd/ax

# A current NATS server built from its Go module (the Debian one is too old);
# the multi-process tests run it standalone.
$(BIN)/nats-server: services/go.mod
	@echo "building $(BIN)/nats-server (for ax bench and the multi-process tests)"
	cd services && $(GO) build -o ../$(BIN)/nats-server github.com/nats-io/nats-server/v2

servers:
	bash infra/dev/servers.sh

## tools: install the Debian packages the tests drive when missing: promtool (prometheus) for the metric names and alert rules, headless Chromium for the web console.
tools:
	bash infra/dev/tools.sh

## run: build ax (and the nats-server ax bench starts), apply migrations and start all five services with an embedded NATS JetStream.
run: build $(BIN)/nats-server servers
	@echo "starting ax up: API and console on http://127.0.0.1:8080, metrics on http://127.0.0.1:8080/metrics (Ctrl-C stops it)"
	$(BIN)/ax up

## test: the tree check, vet, then every unit and integration test under the race detector against real MySQL, Redis and NATS.
test: check-tree build $(BIN)/nats-server servers tools vet
	AX_TEST_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)
	$(MAKE) --no-print-directory test-grants

# Packages whose whole test suite runs again as a MySQL user holding only
# the services' privileges and a Redis ACL user holding only ax's rules
# (docs/security.md#least-privilege-for-the-servers).
GRANTS_PKGS := ./services/reaper/ ./services/executor/ ./services/timer/ ./services/dispatcher/ \
	./services/internal/lease/ ./services/internal/membership/ ./services/internal/clock/

## test-grants: the services' suites again as a DML-only MySQL user and a Redis ACL user of ax's prefix and commands, proving the documented grants suffice.
test-grants: servers
	AX_TEST_MYSQL_GRANTS=dml AX_TEST_REDIS_ACL=1 $(GO) test -race -count=1 -timeout 10m $(GRANTS_PKGS)

## test-short: the fast tests only (skips the 10,000-transaction and multi-process tests).
test-short: servers
	$(GO) test -short -count=1 $(PKGS)

## check-tree: no tracked file over 1 MB, no committed executable, every module tidy.
check-tree:
	bash infra/dev/check-tree.sh

vet:
	@unformatted="$$(gofmt -l contracts events infra services)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# `make bench` knobs: runs per workload (figures are medians) and extra
# `ax bench` flags, e.g. BENCH_FLAGS='--topology split --cpuprofile prof'.
BENCH_REPS  ?= 1
BENCH_FLAGS ?=

## bench: Go micro-benchmarks of the hot paths (with allocations), then `ax bench`: the standard end-to-end workloads.
bench: build $(BIN)/nats-server servers
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)
	$(BIN)/ax bench --reps $(BENCH_REPS) $(BENCH_FLAGS)

# `make chaos` knobs: AX_CHAOS_ONLY=<part of a scenario name> runs only those.
## chaos: the fault suite, not part of test: private MariaDB, Redis and NATS on free ports, the five services as processes, one fault at a time under load, every acknowledged task checked (about 20 minutes).
chaos: build $(BIN)/nats-server servers
	AX_CHAOS=1 AX_TEST_BIN_DIR=$(CURDIR)/$(BIN) AX_CHAOS_REPORT=$(CURDIR)/$(BIN)/chaos-report.md \
		$(GO) test -count=1 -v -timeout 60m -run TestChaos ./services/chaos/
	@cat $(BIN)/chaos-report.md

clean:
	rm -rf $(BIN) .data
