#!/usr/bin/env bash
# Run an example program against device models served by `npuvfio sim`.
#   run_example.sh NPUVFIO DEVICE EXAMPLE [--sims N] [--expect REGEX] [--signal SIG] [-- ARGS...]
# Starts N models (default 1), runs EXAMPLE ARGS... SOCKET..., and fails
# unless the example exits 0, its output matches REGEX (when given) and
# every model exits cleanly after its client left. --signal: send SIG to the
# example once it has printed its first line, as a user's Ctrl-C would.
set -euo pipefail
cli=$1 device=$2 example=$3
shift 3
sims=1 expect='' sig='' args=()
while [ $# -gt 0 ]; do
    case $1 in
    --sims) sims=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --signal) sig=$2; shift 2 ;;
    --) shift; args=("$@"); break ;;
    *) echo "run_example.sh: unknown argument $1"; exit 2 ;;
    esac
done
dir=$(mktemp -d /tmp/npv-example-XXXXXX)
pids=() socks=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
for i in $(seq 1 "$sims"); do
    sock=$dir/$device-$i.sock
    "$cli" sim --device "$device" --socket "$sock" --once &
    pids+=($!) socks+=("$sock")
done
for i in "${!socks[@]}"; do
    for _ in $(seq 1 1000); do
        [ -S "${socks[$i]}" ] && break
        kill -0 "${pids[$i]}" 2>/dev/null || { echo "FAIL: npuvfio sim exited before it listened"; exit 1; }
        sleep 0.01
    done
    [ -S "${socks[$i]}" ] || { echo "FAIL: npuvfio sim never listened on ${socks[$i]}"; exit 1; }
done
out=$dir/out
status=0
if [ -n "$sig" ]; then
    "$example" "${args[@]}" "${socks[@]}" >"$out" &
    ex=$!
    for _ in $(seq 1 1000); do
        [ -s "$out" ] && break
        kill -0 $ex 2>/dev/null || break
        sleep 0.01
    done
    kill -s "$sig" $ex 2>/dev/null || true
    wait $ex || status=$?
else
    "$example" "${args[@]}" "${socks[@]}" >"$out" || status=$?
fi
cat "$out"
[ "$status" -eq 0 ] || { echo "FAIL: $example exited $status"; exit 1; }
if [ -n "$expect" ] && ! grep -Eq "$expect" "$out"; then
    echo "FAIL: the output does not match: $expect"
    exit 1
fi
# --once: each model leaves when the example has closed its connection.
for p in "${pids[@]}"; do wait "$p"; done
pids=()
