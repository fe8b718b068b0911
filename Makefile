# Docstream's developer commands. `make test` is the one command that runs
# every test (it is what .ci/run runs); `make run` serves the demo.

GO ?= go
FUZZTIME ?= 5s
SHARED ?= ../shared

.PHONY: run test check unit fuzz conformance e2e bench bench-smoke

run:
	$(GO) run ./cmd/docstream --demo

test: check unit fuzz bench-smoke conformance e2e

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet ./...

unit:
	bash store/pgtest/install.sh
	DOCSTREAM_TEST_PG=1 $(GO) test -race -count=1 -timeout 15m ./...

fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash .ci/fuzz ./acp ./documents ./translate ./sse ./openai ./agent ./gateway ./cmd/docstream

conformance:
	@if [ -d $(SHARED)/conformance ]; then \
		for m in translate gateway openai runs faults; do \
			echo "== conformance $$m"; python3 $(SHARED)/conformance/check.py $$m || exit 1; done; \
	else echo "conformance: $(SHARED)/conformance not found, skipped"; fi

e2e:
	bash gateway/e2e/run.sh

bench:
	$(GO) run ./cmd/docstream-bench

bench-smoke:
	@if [ -d cmd/docstream-bench ]; then $(GO) run ./cmd/docstream-bench -smoke; fi
