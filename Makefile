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
	$(GO) test -race -count=1 -timeout 15m ./...

fuzz:
	@for t in FuzzDecoder FuzzSegmenter FuzzLexer FuzzLineReader; do \
		if grep -q "func $$t" translate/*_test.go; then \
			$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) ./translate || exit 1; fi; done
	@for p in ./sse ./gateway; do for t in $$(grep -ho 'func Fuzz[A-Za-z]*' $$p/*_test.go 2>/dev/null | sed 's/func //'); do \
		$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$p || exit 1; done; done

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
