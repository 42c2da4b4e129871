#!/usr/bin/env bash
# Run an example program against a device model served by `npuvfio sim`.
#   run_example.sh NPUVFIO DEVICE EXAMPLE
set -euo pipefail
cli=$1 device=$2 example=$3
dir=$(mktemp -d /tmp/npv-example-XXXXXX)
sock=$dir/$device.sock
"$cli" sim --device "$device" --socket "$sock" --once &
sim=$!
trap 'kill $sim 2>/dev/null || true; wait $sim 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 1000); do
    [ -S "$sock" ] && break
    kill -0 $sim 2>/dev/null || { echo "FAIL: npuvfio sim exited before it listened"; exit 1; }
    sleep 0.01
done
[ -S "$sock" ] || { echo "FAIL: npuvfio sim never listened on $sock"; exit 1; }
"$example" "$sock"
# --once: the model leaves when the example has closed its connection.
wait $sim
