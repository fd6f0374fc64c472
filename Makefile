# mcp-exec: `make` builds the static binary, `make test` runs every suite.
VERSION ?= $(shell cat VERSION)
GO      ?= go
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test bench image clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o mcp-exec .

test:
	./scripts/test.sh

# bench: the side-by-side benchmark (figures vs floors); see README "Performance".
bench: build
	cd bench && $(GO) run . -bin ../mcp-exec $(BENCHFLAGS)

# image: the container image without a registry (scripts/offline-image.sh).
image: build
	./scripts/offline-image.sh

clean:
	rm -f mcp-exec
