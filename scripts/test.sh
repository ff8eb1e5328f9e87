#!/usr/bin/env bash
# Installs what rein's tests need on a Debian machine, then runs the whole suite.
# Usage: scripts/test.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the suite uses beyond Rust itself: a C compiler and make for the build (jemalloc), Python 3 and Node.js for the test
# backends and apps (tests/backends, tests/apps), PHP-FPM for the PHP apps, md5sum (coreutils) to check uploads.
packages=()
{ command -v cc && command -v make; } >/dev/null || packages+=(build-essential)
command -v python3 >/dev/null || packages+=(python3)
command -v node >/dev/null || packages+=(nodejs)
compgen -G "/usr/sbin/php-fpm*" >/dev/null || packages+=(php-fpm)
if [ ${#packages[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}"
fi
command -v cargo >/dev/null || { echo "scripts/test.sh: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }

cargo test --locked "$@"
