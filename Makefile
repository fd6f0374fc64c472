# mcp-exec: `make` builds the static binary, `make test` runs every suite.
VERSION ?= $(shell cat VERSION)
GO      ?= go
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test unit e2e sdk image clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o mcp-exec .

test:
	./scripts/test.sh

clean:
	rm -f mcp-exec
