#!/usr/bin/env bash
# make bench: benchmarks with results under docs/benchmarks/ (JSON + Markdown).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/benchmarks
go run ./test/bench/sitebench -bin bin/overtime -out docs/benchmarks
# Micro-benchmarks of the hot paths, for benchstat comparisons between commits.
go test -run='^$' -bench=. -benchmem -count=5 ./sitemgmt/schedule ./sitemgmt/render | tee docs/benchmarks/micro.txt
