#!/usr/bin/env bash
# usdt_probes.sh USDT FILE...
# Every npuvfio USDT probe the README documents is in each FILE's
# .note.stapsdt (readelf -n), under provider "npuvfio", and none has a
# semaphore (lib/core/trace.h: an untraced probe is a nop, nothing more).
# USDT is the build's NPV_HAVE_USDT: 0 (built without sys/sdt.h or with
# -DNPUVFIO_USDT=OFF) skips with 77.
set -euo pipefail
usdt=$1
shift
if [ "$usdt" != 1 ]; then
    echo "SKIP: built without USDT probes (no sys/sdt.h, or NPUVFIO_USDT=OFF)"
    exit 77
fi
expected=(submit doorbell completion job_timeout ring_reset reset domain_switch dma_map dma_unmap)
fail=0
for f in "$@"; do
    notes=$(readelf -n "$f")
    # "Provider: P" then "Name: N" then "Location: ..., Semaphore: S" per probe.
    probes=$(awk '
        # readelf --wide puts "Provider:" on the note header line: match anywhere.
        match($0, /Provider: [^ \t]+/) { prov = substr($0, RSTART + 10, RLENGTH - 10) }
        $1 == "Name:" { name = $2 }
        /Semaphore:/ { sem = $NF; print prov, name, sem }' <<<"$notes")
    for p in "${expected[@]}"; do
        if ! grep -q "^npuvfio $p " <<<"$probes"; then
            echo "FAIL: $f has no USDT probe npuvfio:$p"
            fail=1
        fi
    done
    while read -r prov name sem; do
        [ "$prov" = npuvfio ] || continue
        if [ $((sem)) -ne 0 ]; then
            echo "FAIL: $f: npuvfio:$name has a semaphore ($sem)"
            fail=1
        fi
    done <<<"$probes"
    n=$(grep -c '^npuvfio ' <<<"$probes" || true)
    echo "$f: $n npuvfio probe sites"
done
exit $fail
