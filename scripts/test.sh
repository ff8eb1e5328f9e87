#!/usr/bin/env bash
# Installs what rein's tests need on a Debian machine, then runs the whole suite.
# Usage: scripts/test.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the suite uses beyond Rust itself. Each later subsystem adds its peers here (PHP-FPM, Node.js, ...).
packages=()
command -v cc >/dev/null || packages+=(build-essential)
if [ ${#packages[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}"
fi
command -v cargo >/dev/null || { echo "scripts/test.sh: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }

cargo test --locked "$@"
