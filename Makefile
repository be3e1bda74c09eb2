# Setpoint's one entry point for developers and CI: what CI runs, you can run.
# `make help` lists the targets.

GO       ?= go
BUF      ?= $(GO) run github.com/bufbuild/buf/cmd/buf@v1.73.0
CORPUS   ?= testdata/conformance/scenarios

.PHONY: help run generate lint check-generated vet kube-binaries test conformance bench fuzz fuzz-short crash

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

run: ## start the server on its embedded default (./setpoint-data, 127.0.0.1:7443)
	$(GO) run ./cmd/setpoint-server

generate: ## regenerate the Go code of proto/ with buf and the local plugins
	$(BUF) generate

lint: ## buf lint and go vet
	$(BUF) lint
	$(GO) vet ./...

check-generated: generate ## fail when the committed generated code is stale
	@git diff --exit-code -- proto || { echo "generated code is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto)" || { git status --porcelain -- proto; echo "untracked generated files: run 'make generate' and commit"; exit 1; }

vet:
	$(GO) vet ./...

kube-binaries: ## build (once, cached in ~/.cache/setpoint) the kube-apiserver and etcd the agent's e2e tests run
	./hack/kube-binaries.sh

test: check-generated lint kube-binaries ## everything CI runs: generated code fresh, lint, all tests, the conformance corpus over gRPC
	$(GO) test -count=1 -timeout 30m ./...
	$(GO) run ./cmd/setpoint-conformance $(CORPUS)
	$(MAKE) fuzz-short

conformance: ## replay the conformance corpus through a real server over gRPC
	$(GO) run ./cmd/setpoint-conformance $(CORPUS)

bench: ## Go benchmarks of the engine, the store and the server
	$(GO) test -run '^$$' -bench . -benchmem ./engine ./store ./server

# Every fuzz target, as package:Target. `make fuzz` runs each for FUZZTIME;
# CI runs each for FUZZTIME_SHORT (see docs/reliability.md).
FUZZ_TARGETS   = ./engine:FuzzDecide ./server/convert:FuzzRecommendRequest ./server/convert:FuzzRoundTrip ./server:FuzzObserve \
                 ./store:FuzzRecordCodec ./store:FuzzDecodeRecord ./store:FuzzRecordKey
FUZZTIME       ?= 60s
FUZZTIME_SHORT ?= 3s

fuzz: ## run every fuzz target for FUZZTIME each (default 60s; e.g. make fuzz FUZZTIME=30m)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
	  $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 100x; done

KILLS ?= 200

crash: ## the crash test with KILLS SIGKILLs (default 200; CI runs 20)
	$(GO) test ./test/crash -count=1 -v -timeout 30m -crash.kills $(KILLS)

fuzz-short: ## what CI runs: every fuzz target for FUZZTIME_SHORT each
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)
