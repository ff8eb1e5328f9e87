#!/usr/bin/env bash
# Fuzzes rein's parsers and decoders with libFuzzer (the targets in fuzz/fuzz_targets/), each for a bounded
# time, on the stable toolchain; fails if any target crashes, hangs or runs out of memory.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 60 s each, every target)
# FUZZ_JOBS=N runs N targets at once (default: one per CPU).
#
# Coverage instrumentation takes only stable `-C` flags (the ones cargo-fuzz passes, less the address
# sanitizer, which needs nightly's -Z and adds little to safe Rust), so neither nightly nor cargo-fuzz is
# needed. The corpus each target grows is kept in target/fuzz/corpus/TARGET (the seeds in fuzz/seeds/ are
# read, never written); a crashing input is saved in target/fuzz/artifacts/TARGET/, and the script prints
# how to replay it. A crash found becomes a regression test in src/fuzz_tests.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in fuzz/fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
jobs=${FUZZ_JOBS:-$(nproc)}

# libfuzzer-sys compiles libFuzzer from its C++ source.
if ! command -v c++ >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq g++
fi

host=$(rustc -vV | sed -n 's/^host: //p')
out="$PWD/target/fuzz"
export CARGO_TARGET_DIR="$out"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
# --target: the build scripts and proc-macros are built for the host without instrumentation.
started=$SECONDS
(cd fuzz && cargo build --locked --release --target "$host" --bins)
echo "fuzz: targets built in $((SECONDS - started)) s"
bin="$out/$host/release"

# Runs one target; its output goes to a log, a summary line to stdout.
fuzz_one() {
    local t=$1 corpus="$out/corpus/$1" artifacts="$out/artifacts/$1" log="$out/logs/$1.log"
    local dict=()
    [ -f "fuzz/dicts/$t.dict" ] && dict=("-dict=fuzz/dicts/$t.dict")
    mkdir -p "$corpus" "$artifacts" "$out/logs"
    # -timeout: an input taking 10 s is a hang (a parser must never loop); -rss_limit_mb: a leak or an
    # allocation a hostile input can grow.
    if "$bin/$t" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" "fuzz/seeds/$t" >"$log" 2>&1; then
        echo "fuzz: $t ok: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs," \
            "corpus $(find "$corpus" -type f | wc -l) inputs"
    else
        echo "fuzz: $t FAILED; the end of $log:"
        tail -n 40 "$log"
        echo "fuzz: replay the input with: $bin/$t $artifacts/<file>"
        return 1
    fi
}

# Each failed target adds its name to this file: exit statuses are lost once `wait -n` has reaped a job.
failures="$out/failed"
rm -f "$failures"
running=0
for t in "${targets[@]}"; do
    [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "fuzz: no target $t" >&2; exit 2; }
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    { fuzz_one "$t" || echo "$t" >>"$failures"; } &
    running=$((running + 1))
done
wait
if [ -s "$failures" ]; then
    echo "fuzz: target(s) failed: $(tr '\n' ' ' <"$failures")"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, no crash"
