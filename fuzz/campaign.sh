#!/usr/bin/env bash
# The long campaign: fuzz/campaign.sh SECONDS TARGET... runs the targets one after another,
# at low priority, logging to fuzz/logs/TARGET.log.
set -u
cd "$(dirname "$0")"
seconds=$1
shift
mkdir -p logs
for target in "$@"; do
  nice -n 19 ./run.sh "$target" "$seconds" > "logs/$target.log" 2>&1
done
