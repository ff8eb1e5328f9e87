#!/usr/bin/env bash
# Installs what rein's tests need on a Debian machine, then runs the whole suite.
# Usage: scripts/test.sh [extra cargo test arguments]   (FUZZ_SECONDS=N: each fuzz target's time, 0 to skip)
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the suite uses beyond Rust itself: a C compiler and make for the build (jemalloc), Python 3 (with venv) and Node.js for the test
# backends and apps (tests/backends, tests/apps), PHP-FPM for the PHP apps, Perl and Plack for the PSGI apps, md5sum
# (coreutils) to check uploads.
packages=()
{ command -v cc && command -v make; } >/dev/null || packages+=(build-essential)
command -v python3 >/dev/null || packages+=(python3)
# venv with ensurepip (Debian splits it out): the `home` test makes a virtualenv.
python3 -c "import ensurepip" 2>/dev/null || packages+=(python3-venv)
command -v node >/dev/null || packages+=(nodejs)
compgen -G "/usr/sbin/php-fpm*" >/dev/null || packages+=(php-fpm)
# Ruby with Rack for the `"type": "ruby"` apps (tests/apps/ruby), Sinatra for the one written with it and examples/rack.
command -v ruby >/dev/null || packages+=(ruby)
command -v ruby >/dev/null && ruby -e 'require "rack"' 2>/dev/null || packages+=(ruby-rack)
command -v ruby >/dev/null && ruby -e 'require "sinatra/base"' 2>/dev/null || packages+=(ruby-sinatra)
# Perl with ithreads (Debian's) runs the PSGI apps; Plack for the Plack::Builder apps (tests/apps/perl, examples/plack).
command -v perl >/dev/null || packages+=(perl)
perl -MPlack -e 1 2>/dev/null || packages+=(libplack-perl)
# `ip` and `unshare`: the welcome-page test runs rein in a network namespace of its own (port 8080 is fixed), and
# the fleet tests each node (tests/it/fleet);
# `ss` (iproute2 too): the backlog test reads the listening sockets' queue limits; `mount`: the read-only state
# directory test binds it read-only in a mount namespace of rein's own.
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || packages+=(iproute2)
command -v unshare >/dev/null || packages+=(util-linux)
# curl: the HTTPS and HTTP/2 tests drive rein with it (--http2, --resolve, --limit-rate).
command -v curl >/dev/null || packages+=(curl)
# `rein top` is tested in a real terminal: tmux runs it, its keys are sent and its screen read.
command -v tmux >/dev/null || packages+=(tmux)
# `rein dashboard` is tested in a real browser: Debian's headless Chromium driven by its chromedriver.
command -v chromium >/dev/null || packages+=(chromium)
command -v chromedriver >/dev/null || packages+=(chromium-driver)
# systemd-analyze: the service test verifies dist/rein.service.
command -v systemd-analyze >/dev/null || packages+=(systemd)
# promtool and prometheus: the metrics tests check rein's exposition and scrape it with a real Prometheus.
{ command -v promtool && command -v prometheus; } >/dev/null || packages+=(prometheus)
command -v mount >/dev/null || [ -x /usr/bin/mount ] || [ -x /bin/mount ] || packages+=(mount)
# protoc: building rein compiles etcd's gRPC definitions (etcd-client), for fleets.
command -v protoc >/dev/null || packages+=(protobuf-compiler)
# etcd and etcdctl: the fleet tests run a real 3-member etcd cluster.
command -v etcd >/dev/null || packages+=(etcd-server)
command -v etcdctl >/dev/null || packages+=(etcd-client)
if [ ${#packages[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}"
fi
command -v cargo >/dev/null || { echo "scripts/test.sh: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }

# Unformatted or lint-failing code fails the run as a failing test does.
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
# Go: the Go example's test (tests/it/examples.rs) builds examples/go, and Pebble below is built with it. The
# official tarball's /usr/local/go/bin/go (the test looks there too), else Debian's golang-go.
go=$(command -v go || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; } || true)
if [ -z "$go" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go
    go=$(command -v go)
fi
# Pebble, Let's Encrypt's test CA, and its DNS server for the ACME tests (tests/it/tls/acme.rs), built with Go
# into target/tools/ once. The version is the tests' (pebble.rs).
pebble_version=v2.10.1
tools="$PWD/target/tools"
if [ ! -x "$tools/pebble" ] || [ ! -x "$tools/pebble-challtestsrv" ]; then
    mkdir -p "$tools"
    GOBIN="$tools" "$go" install \
        "github.com/letsencrypt/pebble/v2/cmd/pebble@$pebble_version" \
        "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@$pebble_version" \
        || echo "scripts/test.sh: could not install Pebble; the ACME tests will be skipped" >&2
fi

cargo test --locked "$@"

# A one-minute soak under faults (bench/soak): static, proxy, Node.js, PHP and Python routes under load while the
# configuration changes, apps reload, instances are killed and a backend goes away; fails on any failed GET or on
# rein's RSS or descriptors growing. It uses the debug binary the tests just built. Only on a whole-suite run (no
# arguments); SOAK=0 leaves it out.
if [ $# -eq 0 ] && [ "${SOAK:-1}" != 0 ]; then
    bench/soak --minutes 1 --ci
fi

# Each fuzz target for a bounded time (scripts/fuzz.sh), on a whole-suite run only; FUZZ_SECONDS=0 skips it.
fuzz_seconds=${FUZZ_SECONDS:-15}
if [ $# -eq 0 ] && [ "$fuzz_seconds" != 0 ]; then
    scripts/fuzz.sh "$fuzz_seconds"
fi
