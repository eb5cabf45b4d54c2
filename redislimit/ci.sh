#!/usr/bin/env bash
# CI for the redislimit module (its own go.mod; the root's .ci/run calls this
# from the repository root). Installs redis-server when it is missing and we
# are root, then: gofmt, go vet, go test -race (against real redis-server
# processes the tests start themselves; REDISLIMIT_REQUIRE_SERVER makes a
# missing binary a failure instead of a skip), the Prometheus example module
# (vet, build, self-test), and a quick benchmark run.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n== redislimit: %s\n' "$*"; }

if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "apt-get install -y redis-server"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is missing and cannot be installed here (need root and apt-get)" >&2
    exit 1
  fi
fi
redis-server --version

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet ./..."
go vet ./...

step "go test -race ./..."
REDISLIMIT_REQUIRE_SERVER=1 go test -race -count=1 ./...

step "the concurrency tests at GOMAXPROCS 1, 4 and 16, under -race"
REDISLIMIT_REQUIRE_SERVER=1 go test -race -count=1 -cpu=1,4,16 -run 'Concurrent|Race|Contention|UnderLoad|Exact' ./...

step "examples/prometheus (its own module): vet, build, and its self-test against a redis-server on a unix socket"
(cd examples/prometheus && go vet ./... && go build -o /dev/null .)
sock=$(mktemp -d)
redis-server --port 0 --unixsocket "$sock/redis.sock" --save '' --appendonly no --dir "$sock" --loglevel warning >/dev/null &
redis_pid=$!
for _ in $(seq 200); do [ -S "$sock/redis.sock" ] && break; sleep 0.05; done
go -C examples/prometheus run . -network unix -addr "$sock/redis.sock" -selftest
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; rm -rf "$sock"

step "benchmarks (quick)"
REDISLIMIT_REQUIRE_SERVER=1 go test -run='^$' -bench=. -benchtime=100ms -count=1 ./...
