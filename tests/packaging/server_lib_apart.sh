#!/usr/bin/env bash
# libnpuvfio exports no server symbol; libnpuvfio-server exports only
# npv_vus_* and needs nothing of libnpuvfio's beyond its exported API.
#   server_lib_apart.sh LIBNPUVFIO_SO LIBNPUVFIO_SERVER_SO
set -euo pipefail
lib=$1
srv=$2
# Symbol names without their version (npv_x@@NPUVFIO_0.1), version nodes left out.
defined() { nm -D --defined-only "$1" | awk '$2 != "A" {print $3}' | sed 's/@.*//'; }
in_lib=$(defined "$lib" | grep '^npv_vus' || true)
if [ -n "$in_lib" ]; then
    echo "FAIL: libnpuvfio carries server symbols:"; printf '  %s\n' $in_lib; exit 1
fi
srv_all=$(defined "$srv" | grep -v '^$' | sort -u)
not_vus=$(printf '%s\n' "$srv_all" | grep -v '^npv_vus' || true)
if [ -n "$not_vus" ]; then
    echo "FAIL: libnpuvfio-server exports more than npv_vus_*:"; printf '  %s\n' $not_vus; exit 1
fi
lib_all=$(defined "$lib" | sort -u)
missing=""
for s in $(nm -D --undefined-only "$srv" | awk '{print $2}' | sed 's/@.*//' | grep '^npv_' || true); do
    printf '%s\n' "$lib_all" | grep -qx "$s" || missing="$missing $s"
done
if [ -n "$missing" ]; then
    echo "FAIL: libnpuvfio-server needs unexported symbols:$missing"; exit 1
fi
echo "PASS: $(printf '%s\n' "$srv_all" | wc -l) server symbols, none in libnpuvfio"
