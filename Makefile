# Shortcuts for the commands CONTRIBUTING.md describes.

.PHONY: test lint ci bench

# test: every test of the library, with the race detector.
test:
	go test -race -count=1 ./...

# lint: golangci-lint v2.15.0 (.golangci.yml) on the library and on bench/
# and chaos/, modules of their own; .ci/run installs that version.
lint:
	golangci-lint run ./...
	cd bench && golangci-lint run --config ../.golangci.yml ./...
	cd chaos && golangci-lint run --config ../.golangci.yml ./...

# ci: what CI runs on a clean clone: services, tests, lint, paging check, chaos, bench smoke.
ci:
	bash .ci/run

# bench: the quick profile of the benchmark (about 15 minutes on 2 cores).
bench:
	cd bench && go run . -profile quick
