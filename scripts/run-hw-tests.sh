#!/usr/bin/env bash
# run-hw-tests.sh: the hardware runner's one command. For each DEVICE=ADDR it
# checks the IOMMU and the group, binds the device to vfio with the CLI's
# in-use guards, reserves hugepages if asked, runs every ctest test labelled
# `hw` and DEVICE against it, writes JUnit XML and a JSON record beside it
# (the device's identity and version registers and the backend the library
# chose, from `npuvfio info --open`; each test case's verdict), prints a
# one-screen summary, and gives the machine back as it found it
# (driver binding, hugepage count) on every exit path: success, failure,
# SIGINT/SIGTERM/SIGHUP, a test killed at its timeout.
#
# A device that is absent, in use by the host, behind no IOMMU, or refused by
# `npuvfio bind --dry-run` is reported and skipped; nothing of it is touched.
#
# Why a script and not `npuvfio selftest`: the runner supervises ctest and the
# test programs (any of which may hang or crash) and must outlive them to
# restore the machine; binding, the guards and hugepages are the CLI's
# (`npuvfio bind/unbind/hugepages`), so the script adds only the order of
# steps and the traps. See docs/hardware-runner.md.
#
# usage: run-hw-tests.sh [options] DEVICE=ADDR...
#   DEVICE   edgetpu | rknpu | aicore | edu (QEMU's edu: the generic kernel-VFIO suites)
#   ADDR     a PCI address DDDD:BB:DD.F (or BB:DD.F), or a platform device name
#            (rknpu: fdab0000.npu)
# options:
#   --build DIR        the ctest build tree (default: build/default)
#   --out DIR          where the JUnit, JSON record and summary go (default: BUILD/hw-results)
#   --hugepages N      reserve N 2 MiB hugepages for the run (restored after)
#   --timeout SECS     per-test timeout for tests without one (default 300)
#   --cli PATH         the npuvfio CLI (default: BUILD/tools/npuvfio, else npuvfio on PATH)
#   --ctest PATH       ctest (default: ctest on PATH)
#   --dry-run          check and report; bind, reserve and run nothing
# environment: NPUVFIO_SYSFS_ROOT, NPUVFIO_PROC_ROOT, NPUVFIO_STATE_DIR as for the CLI.
#
# Exit status: 0 every device ran and nothing failed; 1 a test failed or a step
# broke; 2 the command line was wrong (a malformed DEVICE=ADDR included); 3 no
# test failed but a device was skipped (absent, in use, no IOMMU, refused);
# 128+N killed by signal N (after restoring).
set -uo pipefail

prog=run-hw-tests
here=$(cd "$(dirname "$0")" && pwd)
usage() {
    sed -n '/^# usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
}
die_usage() {
    echo "$prog: $*" >&2
    echo "$prog: usage: run-hw-tests.sh [options] DEVICE=ADDR... (--help)" >&2
    exit 2
}

build="" out="" hugepages="" timeout=300 cli="" ctest=ctest dry=0 pairs=()
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --build | --out | --hugepages | --timeout | --cli | --ctest)
        [ $# -ge 2 ] || die_usage "$1 needs a value"
        case $1 in
        --build) build=$2 ;; --out) out=$2 ;; --hugepages) hugepages=$2 ;;
        --timeout) timeout=$2 ;; --cli) cli=$2 ;; --ctest) ctest=$2 ;;
        esac
        shift 2 ;;
    --dry-run) dry=1; shift ;;
    -*) die_usage "unknown option $1" ;;
    *) pairs+=("$1"); shift ;;
    esac
done
[ ${#pairs[@]} -gt 0 ] || die_usage "no DEVICE=ADDR given"
case $hugepages in '' | [0-9] | [0-9]*[0-9]) ;; *) die_usage "--hugepages takes a page count, not '$hugepages'" ;; esac
case $hugepages in *[!0-9]*) die_usage "--hugepages takes a page count, not '$hugepages'" ;; esac
case $timeout in '' | *[!0-9]*) die_usage "--timeout takes seconds, not '$timeout'" ;; esac

# The device table: DEVICE -> the environment variable its suites read the
# hardware's address from (each suite's harness: tests/<dev>/*_harness.c;
# the guest programs: tests/vm/guest_edu_util.c) and the address kind.
dev_env() {
    case $1 in
    edgetpu) echo NPUVFIO_TEST_EDGETPU ;;
    rknpu) echo NPUVFIO_TEST_RKNPU ;;
    aicore) echo NPUVFIO_TEST_AICORE ;;
    edu) echo NPVTEST_EDU ;;
    *) return 1 ;;
    esac
}

# Parse every argument before touching anything: one malformed pair and
# nothing runs (exit 2).
devs=() addrs=()
for p in "${pairs[@]}"; do
    case $p in *=*) ;; *) die_usage "'$p' is not DEVICE=ADDR" ;; esac
    d=${p%%=*} a=${p#*=}
    dev_env "$d" >/dev/null || die_usage "'$p': unknown device '$d' (edgetpu, rknpu, aicore, edu)"
    if [[ $a =~ ^[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]$ ]]; then
        a=0000:$a
    fi
    if [[ $a =~ ^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]$ ]]; then
        a=${a,,}
    elif [ "$d" = rknpu ] && [[ $a =~ ^[0-9a-f]+\.[A-Za-z0-9_-]+$ ]]; then
        : # a platform device's sysfs name
    else
        die_usage "'$p': malformed address '$a' (want DDDD:BB:DD.F$([ "$d" = rknpu ] && echo ' or a platform name such as fdab0000.npu'))"
    fi
    devs+=("$d") addrs+=("$a")
done

root=$(cd "$here/.." && pwd)
[ -n "$build" ] || build=$root/build/default
[ -n "$out" ] || out=$build/hw-results
if [ -z "$cli" ]; then
    if [ -x "$build/tools/npuvfio" ]; then cli=$build/tools/npuvfio; else cli=$(command -v npuvfio || true); fi
fi
[ -n "$cli" ] && [ -x "$cli" ] || die_usage "no npuvfio CLI (--cli PATH; or build it: cmake --build $build --target npuvfio_cli)"
command -v "$ctest" >/dev/null 2>&1 || die_usage "no ctest ('$ctest'; --ctest PATH)"
[ -f "$build/CTestTestfile.cmake" ] || die_usage "$build is not a ctest build tree (--build DIR)"
mkdir -p "$out" || { echo "$prog: cannot create $out" >&2; exit 1; }
out=$(cd "$out" && pwd)

sysfs=${NPUVFIO_SYSFS_ROOT:-/sys}
log() { echo "$prog: $*"; }

# ---- restore on every exit path -----------------------------------------------------------
bound=() # addresses this run moved to vfio (unbound again at exit)
hp_orig="" hp_set=0
child=0 # ctest's process group while a suite runs
restored=0
restore() {
    [ $restored -eq 0 ] || return 0
    restored=1
    if [ "$child" -ne 0 ]; then
        kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$child" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$child" 2>/dev/null
        wait "$child" 2>/dev/null
        child=0
    fi
    local a
    for a in "${bound[@]}"; do
        if "$cli" unbind "$a" >"$out/.unbind" 2>&1; then
            log "restored $a: $(tr '\n' ' ' <"$out/.unbind")"
        else
            log "RESTORE FAILED for $a: $(tr '\n' ' ' <"$out/.unbind")"
        fi
    done
    rm -f "$out/.unbind"
    if [ $hp_set -eq 1 ]; then
        if "$cli" hugepages "$hp_orig" --force >/dev/null 2>&1; then
            log "restored hugepages to $hp_orig"
        else
            log "RESTORE FAILED: hugepages back to $hp_orig"
        fi
    fi
}
on_signal() {
    local sig=$1 code=$2
    log "caught SIG$sig: stopping the tests and restoring the machine"
    interrupted=SIG$sig
    [ -z "$cur" ] || { st_status[$cur]=interrupted st_reason[$cur]="SIG$sig during the tests"; }
    restore
    write_record
    exit "$code"
}
interrupted="" cur=""
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
trap 'restore' EXIT

# ---- facts for the record -------------------------------------------------------------------
json_str() { # a JSON string literal of $1
    local s=$1
    s=${s//\\/\\\\} s=${s//\"/\\\"} s=${s//$'\n'/\\n} s=${s//$'\t'/\\t} s=${s//$'\r'/}
    printf '"%s"' "$s"
}
read1() { [ -r "$1" ] && head -c 256 "$1" 2>/dev/null | head -1 || true; }
iommu_mode() {
    local u=() f
    for f in "$sysfs"/class/iommu/*; do [ -e "$f" ] && u+=("${f##*/}"); done
    if [ ${#u[@]} -eq 0 ]; then echo none; return; fi
    echo "${u[*]}"
}
kernel=$(uname -r)
cmdline=$(read1 "${NPUVFIO_PROC_ROOT:-/proc}/cmdline")
backend_req=${NPUVFIO_IOMMU:-auto} # what the library is asked; each device records what it chose

# Per device: the outcome and the record's fields.
declare -a st_status st_reason st_ids st_group st_junit st_tests st_cases st_time st_driver0 st_node
declare -a st_backend st_ident st_ident_err
write_record() {
    local f=$out/hw-record.json i
    {
        printf '{\n  "tool": "run-hw-tests.sh",\n  "date": %s,\n' "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
        printf '  "host": %s,\n  "kernel": %s,\n  "cmdline": %s,\n' "$(json_str "$(uname -n)")" "$(json_str "$kernel")" "$(json_str "$cmdline")"
        printf '  "iommu": %s,\n  "backend_requested": %s,\n' "$(json_str "$(iommu_mode)")" "$(json_str "$backend_req")"
        printf '  "user": %s,\n  "memlock_kib": %s,\n' "$(json_str "$(id -un 2>/dev/null || id -u)")" "$(json_str "$(ulimit -l)")"
        printf '  "interrupted": %s,\n  "devices": [' "$([ -n "$interrupted" ] && json_str "$interrupted" || echo null)"
        for i in "${!devs[@]}"; do
            [ "$i" -eq 0 ] || printf ','
            printf '\n    {"device": %s, "addr": %s, "status": %s, "reason": %s,\n' \
                "$(json_str "${devs[$i]}")" "$(json_str "${addrs[$i]}")" \
                "$(json_str "${st_status[$i]:-not-run}")" "$(json_str "${st_reason[$i]:-}")"
            printf '     "ids": {%s}, "iommu_group": %s, "driver_before": %s, "nodes": %s,\n' \
                "${st_ids[$i]:-}" "$(json_str "${st_group[$i]:-}")" \
                "$(json_str "${st_driver0[$i]:-}")" "$(json_str "${st_node[$i]:-}")"
            printf '     "backend": %s, "identity": %s, "identity_error": %s,\n' \
                "$([ -n "${st_backend[$i]:-}" ] && json_str "${st_backend[$i]}" || echo null)" \
                "${st_ident[$i]:-null}" \
                "$([ -n "${st_ident_err[$i]:-}" ] && json_str "${st_ident_err[$i]}" || echo null)"
            printf '     "junit": %s, "time_s": %s, "tests": [%s],\n     "cases": [%s]}' \
                "$(json_str "${st_junit[$i]:-}")" "${st_time[$i]:-0}" "${st_tests[$i]:-}" "${st_cases[$i]:-}"
        done
        printf '\n  ]\n}\n'
    } >"$f.tmp" && mv "$f.tmp" "$f"
}

# The device's identity from sysfs (never from the device itself).
dev_dir() {
    if [ -e "$sysfs/bus/pci/devices/$1" ]; then echo "$sysfs/bus/pci/devices/$1"
    elif [ -e "$sysfs/bus/platform/devices/$1" ]; then echo "$sysfs/bus/platform/devices/$1"
    fi
}
driver_of() { local l; l=$(readlink "$1/driver" 2>/dev/null) && echo "${l##*/}" || true; }
ids_of() {
    local k v sep=""
    for k in vendor device subsystem_vendor subsystem_device revision class; do
        v=$(read1 "$1/$k")
        [ -n "$v" ] || continue
        printf '%s%s: %s' "$sep" "$(json_str "$k")" "$(json_str "$v")"
        sep=", "
    done
    if [ -r "$1/of_node/compatible" ]; then
        printf '%s"compatible": %s' "$sep" "$(json_str "$(tr '\0' ' ' <"$1/of_node/compatible")")"
    fi
}

# The JUnit's testcases as JSON objects: name, result, time.
junit_tests() {
    awk '
    function attr(s, k,   r) { r = s; if (!sub(".*[ \t]" k "=\"", "", r)) return ""; sub("\".*", "", r); return r }
    function flush() { if (name != "") { printf "%s{\"name\": \"%s\", \"result\": \"%s\", \"time_s\": %s}", sep, name, res, (t == "" ? 0 : t); sep = ", " } name = "" }
    /<testcase / { flush(); name = attr($0, "name"); t = attr($0, "time"); st = attr($0, "status");
                   res = (st == "run" ? "passed" : st == "fail" ? "failed" : st == "notrun" ? "skipped" : st) }
    /<failure/ { res = "failed" }
    /<skipped/ { res = "skipped" }
    END { flush() }' "$1"
}

# Each test case's verdict, from the JUnit's captured output: a Check suite
# prints one TAP line per case (CK_TAP_LOG_FILE_NAME=-, set for the run;
# "file.c:tcase:test: message"), a case that exited 77 (needs the model) is
# skipped; a program printing plain TAP ("ok N - what # why", the guest
# programs) has a case per line ("# SKIP" skipped). A suite without TAP
# lines (not Check, or dead before its log) counts as one case with its
# ctest result; a failed suite whose cases all passed (a crash, a leak, its
# exit status) adds one failed entry under its own name.
junit_cases() {
    awk '
    function attr(s, k,   r) { r = s; if (!sub(".*[ \t]" k "=\"", "", r)) return ""; sub("\".*", "", r); return r }
    function unxml(s) { gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "\047", s); gsub(/&amp;/, "\\&", s); return s }
    function js(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/[[:cntrl:]]/, " ", s); return "\"" s "\"" }
    function emit(name, tc, res, msg) {
        printf "%s{\"suite\": %s, \"name\": %s, \"tcase\": %s, \"result\": \"%s\", \"message\": %s}", sep, js(suite), js(name), (tc == "" ? "null" : js(tc)), res, (msg == "" ? "null" : js(msg))
        sep = ", "
    }
    function flush() {
        if (suite == "") return
        if (ntap == 0) emit(suite, "", res, "")
        else if (res == "failed" && nfail == 0) emit(suite, "", "failed", "the suite failed outside its cases (exit status, crash or timeout)")
        suite = ""
    }
    /<testcase / { flush(); suite = attr($0, "name"); st = attr($0, "status"); ntap = 0; nfail = 0
                   res = (st == "run" ? "passed" : st == "fail" ? "failed" : st == "notrun" ? "skipped" : st) }
    /<failure/ { if (suite != "") res = "failed" }
    suite != "" && /^([ \t]*<system-out>)?(not )?ok [0-9]+ - / {
        line = $0; sub(/^[ \t]*<system-out>/, "", line)
        ok = (line ~ /^ok /); sub(/^(not )?ok [0-9]+ - /, "", line); line = unxml(line)
        if (line ~ /^[^: ]+\.c:[^:]+:[^:]+: /) {
            # Check: file.c:tcase:test: message
            split(line, f, ":"); tc = f[2]; name = f[3]
            msg = line; sub(/^[^:]*:[^:]*:[^:]*: ?/, "", msg)
            r = ok ? "passed" : (msg == "Early exit with return value 77" ? "skipped" : "failed")
        } else {
            # Plain TAP (the guest programs): "what # why"
            tc = ""; name = line; msg = ""
            if (index(name, " # ")) { msg = substr(name, index(name, " # ") + 3); name = substr(name, 1, index(name, " # ") - 1) }
            r = msg ~ /^(SKIP|skip)/ ? "skipped" : ok ? "passed" : "failed"
            name = substr(name, 1, 120)
        }
        if (r == "failed") nfail++
        ntap++
        emit(name, tc, r, (r == "passed" ? "" : msg))
    }
    /<\/testcase>/ { flush() }
    END { flush() }' "$1"
}

# ---- hugepages ------------------------------------------------------------------------------
# Reserved lazily, right before the first device is bound: a run whose every
# device is skipped changes nothing on the machine.
hp_reserved() { "$cli" --json hugepages 2>/dev/null | sed -n 's/.*"reserved": *\([0-9]*\).*/\1/p'; }
hp_done=0
reserve_hugepages() {
    [ -n "$hugepages" ] && [ $hp_done -eq 0 ] || return 0
    hp_done=1
    hp_orig=$(hp_reserved)
    [ -n "$hp_orig" ] || { log "cannot read the hugepage pool ($cli hugepages)"; return 1; }
    if [ "$hugepages" -le "$hp_orig" ]; then
        log "hugepages: $hp_orig already reserved (asked $hugepages)"
        return 0
    fi
    hp_set=1 # restored from here on, even when the kernel gave fewer
    local msg
    if ! msg=$("$cli" hugepages "$hugepages" 2>&1); then
        log "hugepages: $msg"
        return 1
    fi
    log "$msg (was $hp_orig; restored at exit)"
}

# The device's identity as the library sees it: `npuvfio info --open --json`
# opens it as the suites will (same user, same NPUVFIO_IOMMU) and reports the
# backend it chose and a "device" object: kind, PCI revision and the version
# registers, read by a peek (tools/info_device.c), never a driver's open,
# which would reset cores. Its document is one line; "device" is its last key.
identify() {
    local i=$1 a=$2 doc lim=()
    # Bounded: a signal waits for a foreground command, and a device that
    # stops answering must not hold the restore.
    command -v timeout >/dev/null 2>&1 && lim=(timeout 60)
    doc=$("${lim[@]}" "$cli" --json info --open "$a" 2>"$out/.info" | tr -d '\n')
    st_backend[$i]=$(sed -n 's/.*"vfio":{"opened":true,"backend":"\([^"]*\)".*/\1/p' <<<"$doc")
    st_ident[$i]=$(sed -n 's/.*,"device":\({.*}\)}$/\1/p' <<<"$doc")
    if [ -z "${st_backend[$i]}" ]; then
        st_ident_err[$i]=$(sed -n 's/.*"vfio":{"opened":false,"error":"\([^"]*\)".*/\1/p' <<<"$doc")
        [ -n "${st_ident_err[$i]}" ] || st_ident_err[$i]="npuvfio info: $(head -c 300 "$out/.info")"
        log "${devs[$i]}=$a: cannot open it for its identity: ${st_ident_err[$i]}"
    fi
    rm -f "$out/.info"
}

# ---- per device ---------------------------------------------------------------------------
rc_all=0 skipped=0
t_start=$SECONDS
for i in "${!devs[@]}"; do
    d=${devs[$i]} a=${addrs[$i]} cur=$i
    skip() {
        st_status[$i]=skipped st_reason[$i]=$1
        log "$d=$a: SKIPPED: $1 (nothing touched)"
        skipped=1
    }
    dir=$(dev_dir "$a")
    if [ -z "$dir" ]; then
        skip "absent: no such device in $sysfs/bus/{pci,platform}/devices"
        continue
    fi
    st_ids[$i]=$(ids_of "$dir")
    drv=$(driver_of "$dir")
    st_driver0[$i]=$drv
    grp=$(readlink "$dir/iommu_group" 2>/dev/null) && grp=${grp##*/} || grp=""
    st_group[$i]=$grp
    if [ -z "$grp" ]; then
        # The CLI's words for why (no IOMMU at all, or one that does not cover the device).
        why=$("$cli" bind --dry-run "$a" 2>&1 >/dev/null) || true
        skip "no IOMMU: ${why#npuvfio bind: }"
        [ -n "$why" ] || st_reason[$i]="no IOMMU: $a has no IOMMU group"
        continue
    fi
    we_bind=0
    case $drv in
    vfio-pci | vfio-platform) log "$d=$a: already on $drv, left as is (not unbound at exit)" ;;
    *)
        # The CLI's guards, changing nothing: IOMMU coverage, in use by the host
        # (interfaces up, mounts, open DRM/accel nodes), vfio loaded, group viable.
        if ! why=$("$cli" bind --dry-run "$a" 2>&1 >/dev/null); then
            skip "refused: ${why#npuvfio bind: }"
            continue
        fi
        we_bind=1 ;;
    esac
    if [ $dry -eq 1 ]; then
        st_status[$i]=dry-run st_reason[$i]="checks passed; would $([ $we_bind -eq 1 ] && echo "bind (now ${drv:-unbound}) and ")run ctest -L hw -L $d"
        log "$d=$a: ${st_reason[$i]}"
        continue
    fi
    if ! reserve_hugepages; then
        st_status[$i]=failed st_reason[$i]="could not reserve $hugepages hugepages"
        rc_all=1
        break
    fi
    if [ $we_bind -eq 1 ]; then
        # Recorded first: a signal during the bind still unbinds (a no-op when it did not happen).
        bound+=("$a")
        if ! msg=$("$cli" bind "$a" 2>&1); then
            st_status[$i]=failed st_reason[$i]="bind failed: $msg"
            log "$d=$a: ${st_reason[$i]}"
            rc_all=1
            "$cli" unbind "$a" >/dev/null 2>&1
            unset 'bound[${#bound[@]}-1]'
            continue
        fi
        log "$msg"
    fi
    # The nodes a non-root runner needs, and whether this user can open them.
    nodes="" perm=""
    for n in /dev/vfio/vfio "/dev/vfio/$grp" /dev/iommu; do
        [ -e "$n" ] || continue
        nodes="$nodes $n"
        [ -r "$n" ] && [ -w "$n" ] || perm="$perm $n"
    done
    st_node[$i]=${nodes# }
    [ -z "$perm" ] || log "$d=$a: note: this user ($(id -un 2>/dev/null || id -u)) cannot open${perm}: the suites will fail to open the device (see docs/hardware-runner.md, non-root runners)"
    identify "$i" "$a"
    junit=$out/junit-$d-${a//:/_}.xml
    st_junit[$i]=$junit
    rm -f "$junit"
    env_name=$(dev_env "$d")
    log "$d=$a: running ctest -L '^hw\$' -L '^$d\$' with $env_name=$a"
    t0=$SECONDS
    # Its own session and process group, so a signal stops every test it runs.
    # CK_TAP_LOG_FILE_NAME=-: every Check suite prints one TAP line per case,
    # kept whole in the JUnit (the output limits raised) for the per-case record.
    env "$env_name=$a" CK_TAP_LOG_FILE_NAME=- setsid "$ctest" --test-dir "$build" -L '^hw$' -L "^$d\$" \
        --timeout "$timeout" --output-on-failure --output-junit "$junit" \
        --test-output-size-passed 1048576 --test-output-size-failed 1048576 >"$out/ctest-$d.log" 2>&1 &
    child=$!
    wait "$child"
    crc=$?
    child=0
    st_time[$i]=$((SECONDS - t0))
    [ -f "$junit" ] && st_tests[$i]=$(junit_tests "$junit") && st_cases[$i]=$(junit_cases "$junit")
    n_run=$(grep -c '<testcase ' "$junit" 2>/dev/null || echo 0)
    if [ "$n_run" -eq 0 ]; then
        st_status[$i]=failed st_reason[$i]="no test labelled hw and $d ran (ctest rc=$crc; $out/ctest-$d.log)"
        rc_all=1
    elif [ $crc -ne 0 ]; then
        st_status[$i]=failed st_reason[$i]="ctest rc=$crc (log: $out/ctest-$d.log)"
        rc_all=1
    else
        st_status[$i]=passed st_reason[$i]=""
    fi
    # Give this device back before the next one runs.
    if [ $we_bind -eq 1 ]; then
        if msg=$("$cli" unbind "$a" 2>&1); then log "restored $a: $msg"; else log "RESTORE FAILED for $a: $msg"; rc_all=1; fi
        unset 'bound[${#bound[@]}-1]'
    fi
done
cur=""

restore
write_record

# ---- one-screen summary -------------------------------------------------------------------
{
    echo "hardware run on $(uname -n), kernel $kernel, IOMMU $(iommu_mode), backend $backend_req requested, $((SECONDS - t_start)) s"
    echo "test cases (each Check case; a suite that is not Check counts as one):"
    printf '%-8s %-14s %-8s %6s %6s %6s  %-8s %s\n' device addr result passed failed skipped backend note
    for i in "${!devs[@]}"; do
        t=${st_cases[$i]:-}
        np=$(grep -o '"result": "passed"' <<<"$t" | wc -l)
        nf=$(grep -o '"result": "failed"' <<<"$t" | wc -l)
        ns=$(grep -o '"result": "skipped"' <<<"$t" | wc -l)
        printf '%-8s %-14s %-8s %6s %6s %6s  %-8s %s\n' "${devs[$i]}" "${addrs[$i]}" "${st_status[$i]}" \
            "$np" "$nf" "$ns" "${st_backend[$i]:--}" "${st_reason[$i]:0:80}"
        if [ "$nf" -gt 0 ]; then
            grep -o '"suite": "[^"]*", "name": "[^"]*", "tcase": [^,]*, "result": "failed"' <<<"$t" |
                sed 's/"suite": "\([^"]*\)", "name": "\([^"]*\)".*/    failed: \1 \2/; s/failed: \([^ ]*\) \1$/failed: \1/'
        fi
        v=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' <<<"${st_ident[$i]:-}")
        r=$(sed -n 's/.*"pci_revision":"\([^"]*\)".*/\1/p' <<<"${st_ident[$i]:-}")
        [ -z "${st_ident[$i]:-}" ] || echo "    identity: ${r:+PCI revision $r}${v:+, version $v}"
    done
    echo "record: $out/hw-record.json; JUnit: $out/junit-*.xml"
} | tee "$out/summary.txt"
[ $rc_all -eq 0 ] || exit 1
[ $skipped -eq 0 ] || exit 3
exit 0
