# mcp-exec: `make` builds the static binary, `make test` runs every suite.
VERSION ?= $(shell cat VERSION)
GO      ?= go
# COMMIT is what --version names: the checkout's commit, "-dirty" when tracked
# files differ from it, "unknown" outside a git checkout.
COMMIT  ?= $(shell ./scripts/commit.sh)
LDFLAGS := -s -w -X main.commit=$(COMMIT)

.PHONY: build test bench image image-toolbox image-sizes kube-check dist npm clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o mcp-exec .

test:
	./scripts/test.sh

# bench: the side-by-side benchmark (figures vs floors); see docs/performance.md.
bench: build
	cd bench && $(GO) run . -bin ../mcp-exec $(BENCHFLAGS)

# image: the container image without a registry (scripts/offline-image.sh),
# localhost/mcp-exec:$(VERSION). image-toolbox: the same plus the audit tools
# (git, ripgrep, python3, make, file, jq, findutils, diffutils, less),
# localhost/mcp-exec-toolbox:$(VERSION), from the Containerfile's toolbox stage;
# it builds the default image too. Online: podman build [--target toolbox] .
image: build
	./scripts/offline-image.sh

image-toolbox: build
	./scripts/offline-image.sh toolbox

# image-sizes: what the two images weigh (podman image ls).
image-sizes:
	@$${PODMAN:-podman} image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
	  | grep -E '^localhost/mcp-exec(-toolbox)?:$(VERSION) ' || echo "no image yet: make image image-toolbox" >&2

# dist: reproducible release binaries (linux and darwin, amd64 and arm64), a
# .tar.gz of each with LICENSE, README.md and the man page,
# .deb packages and SHA256SUMS in dist/, from the source alone (nothing built
# before); npm: the npm packages from them.
dist:
	./scripts/dist.sh dist

npm: dist
	./scripts/npm-pack.sh dist dist/npm

clean:
	rm -rf mcp-exec dist

# kube-check: deploy/kubernetes/ checked against the project's rules, applied
# to a real kube-apiserver (scripts/kube-apiserver, with etcd), and its
# Deployment played with podman (scripts/kube-check.sh); see
# docs/running-many-agents.md.
kube-check: build
	./scripts/kube-check.sh
