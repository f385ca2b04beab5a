#!/usr/bin/env bash
# Runs one fuzz target for a bounded time: fuzz/run.sh TARGET SECONDS [extra libFuzzer flags].
# The seed corpus in fuzz/corpus/TARGET stays untouched; new inputs go to fuzz/corpus-work/TARGET.
set -euo pipefail
cd "$(dirname "$0")"
target=$1
seconds=${2:-30}
shift 2 || true
mkdir -p "corpus-work/$target" "artifacts/$target"
cargo +nightly fuzz run "$target" "corpus-work/$target" "corpus/$target" -- \
  -dict=jsonrpc.dict -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -artifact_prefix="artifacts/$target/" -print_final_stats=1 "$@"
