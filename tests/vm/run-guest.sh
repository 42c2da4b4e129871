#!/bin/bash
# run-guest.sh: run guest test programs against the real kernel VFIO uAPI in a
# QEMU guest: q35 under TCG (KVM on our CI machines cannot run a guest
# kernel), an emulated Intel VT-d with interrupt remapping (without it VFIO
# refuses to isolate MSI), two of QEMU's edu devices (DMA engine + MSI) and
# pci-testdev. Each edu sits behind a PCIe root port of its own: alone on its
# bus it gets a secondary bus reset, so VFIO_DEVICE_RESET works for it (on the
# root bus it has no reset at all), and the port's ACS keeps it in a group of
# its own, so the two edus are two DMA-capable devices for one domain.
# The guest's /init binds both edus to vfio-pci, runs every program
# with the chosen backend and powers off; the verdicts come back on the
# serial console.
#
# usage: run-guest.sh --kernel debian|custom --backend legacy|iommufd
#                     --work DIR [--timeout SECONDS] [--tool PATH]... PROGRAM...
# A --tool goes to the guest's /bin (the npuvfio CLI, which /init then uses
# to bind edu); a PROGRAM goes to /tests and is run. Dynamically linked ones
# bring their shared libraries along.
# Prints every verdict line, then "N passed, N failed". Exits 0 only when the
# guest ran to the end and nothing failed; never passes without running: a
# missing QEMU, kernel or busybox is a failure with its reason.
#
# Stall watchdog: when the serial console makes no progress for
# NPVTEST_STALL_SECS (default 60) the guest is stopped, the vCPUs' registers
# are dumped through QEMU's monitor into DIR/stall.txt, the program that was
# running is named on a "run-guest: STALL" line, and the run fails.
# Debug switches (environment, all off by default):
#   NPVTEST_QEMU_MONITOR=PATH  the QEMU monitor on a unix socket at PATH
#                              (default: a private one, used by the watchdog)
#   NPVTEST_APPEND="WORDS"     more kernel command-line words (e.g. loglevel=7)
#   NPVTEST_GUEST_WATCH=SECS   /init writes every task's state, wchan and
#                              kernel stack every SECS s to a second serial
#                              port, DIR/serial2.log
#   NPVTEST_KERNEL=PATH        boot this bzImage instead of --kernel's
#   NPVTEST_ACCEL=A, NPVTEST_SMP=N  -accel and -smp for experiments
#   NPVTEST_STALL_HOOK=CMD     run "CMD MONITOR_SOCKET DIR" on a stall, before
#                              QEMU is stopped (its output goes to stall.txt)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kernel="" backend="" work="" timeout=240 progs=() tools=()
while [ $# -gt 0 ]; do
  case $1 in
    --kernel) kernel=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --tool) tools+=("$2"); shift 2 ;;
    -*) echo "run-guest: unknown option $1" >&2; exit 2 ;;
    *) progs+=("$1"); shift ;;
  esac
done
fail() { echo "run-guest: FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
case $kernel in debian|custom) ;; *) fail "--kernel must be debian or custom" ;; esac
case $backend in legacy|iommufd) ;; *) fail "--backend must be legacy or iommufd" ;; esac
[ -n "$work" ] || fail "--work DIR is required"
[ ${#progs[@]} -gt 0 ] || fail "no guest programs given"

qemu=$(command -v qemu-system-x86_64) || fail "qemu-system-x86_64 not installed (apt-get install -t bookworm-backports qemu-system-x86)"
busybox=/bin/busybox
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' ||
  { [ -x /usr/bin/busybox ] && busybox=/usr/bin/busybox; }
[ -x "$busybox" ] || fail "no static busybox (apt-get install busybox-static)"
command -v cpio >/dev/null || fail "cpio not installed"

# ---- kernel --------------------------------------------------------------------
rm -rf "$work" && mkdir -p "$work/root"/{bin,sbin,proc,sys,dev,tmp,tests,lib/modules}
modules=()
if [ "$kernel" = custom ]; then
  kimg=$("$here/build-kernel.sh" "$here/kernel.config") || fail "could not obtain the custom kernel (see above)"
else
  kdir=$("$here/fetch-debian-kernel.sh") || fail "could not obtain Debian's 6.12 kernel (see above)"
  kimg=$kdir/vmlinuz
  kver=$(cat "$kdir/version")
  moddir=$kdir/modules/$kver
  # modules.dep lists a module's dependencies deepest last; load them first
  resolve() {
    local pat=${1//[-_]/[-_]} path deps d rev=""
    path=$(grep -E "(^|/)$pat\.ko(\.xz|\.zst)?:" "$moddir/modules.dep" | head -1 | cut -d: -f1)
    [ -n "$path" ] || { echo "module $1 not in $moddir" >&2; return 1; }
    deps=$(grep -E "^$path:" "$moddir/modules.dep" | cut -d: -f2)
    for d in $deps; do rev="$d $rev"; done
    for d in $rev; do echo "$d"; done
    echo "$path"
  }
  list=$(for m in vfio vfio_iommu_type1 vfio-pci-core vfio-pci i2c-i801; do resolve "$m" || exit 1; done) ||
    fail "kernel modules missing"
  for p in $(echo "$list" | awk '!seen[$0]++'); do
    n=$(basename "$p"); n=${n%.xz}; n=${n%.zst}; n=${n%.ko}
    case $p in
      *.xz) xz -dc "$moddir/$p" ;;
      *.zst) zstd -dcq "$moddir/$p" ;;
      *) cat "$moddir/$p" ;;
    esac > "$work/root/lib/modules/$n.ko"
    echo "$n" >> "$work/root/lib/modules/load-order"
  done
fi
[ -z "${NPVTEST_KERNEL:-}" ] || kimg=$NPVTEST_KERNEL
[ -f "$kimg" ] || fail "kernel image $kimg missing"

# ---- initramfs -------------------------------------------------------------------
cp "$busybox" "$work/root/bin/busybox"
for a in $("$busybox" --list); do [ "$a" = busybox ] || ln -sf busybox "$work/root/bin/$a"; done
cp "$here/guest-init.sh" "$work/root/init"
# A dynamically linked executable (sanitizer builds, the CLI) brings its libraries along.
copy_libs() {
  file -L "$1" | grep -q 'ELF.*dynamically linked' || return 0
  local libs
  libs=$(ldd "$1" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}') || fail "ldd $1 failed"
  for lib in $libs; do
    mkdir -p "$work/root$(dirname "$lib")"
    cp -L "$lib" "$work/root$lib"
  done
  [ -e "$work/root/lib64" ] || ln -s lib "$work/root/lib64" 2>/dev/null || true
}
for p in "${progs[@]}"; do
  [ -x "$p" ] || fail "guest program $p missing"
  cp "$p" "$work/root/tests/"
  copy_libs "$p"
done
for p in "${tools[@]}"; do
  [ -x "$p" ] || fail "guest tool $p missing"
  rm -f "$work/root/bin/${p##*/}" # a busybox applet link of the same name would be written through
  cp "$p" "$work/root/bin/"
  copy_libs "$p"
done
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"

# ---- boot ----------------------------------------------------------------------------
# TCG with one thread for both vCPUs. With QEMU 10.0's multi-threaded TCG (one
# host thread per vCPU, the default) 7 boots in 92 lost a local
# APIC timer interrupt: the vCPU's one-shot count ran down to 0 and nothing
# reached its IRR, so the guest's hrtimer base kept an expiry in the past and
# never reprogrammed the timer; every task sleeping on that CPU stayed asleep
# (the "stall", see README). Round-robin TCG: none in 121 boots.
log=$work/serial.log
# no_timer_check: the kernel's boot-time check that the timer reaches the CPU
# through the (interrupt-remapped) IO-APIC counts ticks in a short busy
# window; a TCG guest on a loaded host misses it and panics ("timer doesn't
# work through Interrupt-remapped IO-APIC", seen at load 14 on 2 cores).
append="console=ttyS0 panic=-1 intel_iommu=on no_timer_check loglevel=1 hugepagesz=2M hugepages=8 npvtest.backend=$backend"
extra=()
if [ -n "${NPVTEST_GUEST_WATCH:-}" ]; then
  append="$append npvtest.watch=$NPVTEST_GUEST_WATCH"
  extra+=(-serial "file:$work/serial2.log")
fi
append="$append ${NPVTEST_APPEND:-}"
# The monitor socket: a unix socket path is limited to 108 bytes.
mon=${NPVTEST_QEMU_MONITOR:-$work/qemu.mon}
mondir=""
if [ ${#mon} -gt 100 ]; then mondir=$(mktemp -d /tmp/npv-mon.XXXXXX) && mon=$mondir/qemu.mon; fi
stall=${NPVTEST_STALL_SECS:-60}
echo "run-guest: $("$qemu" --version | head -1); kernel $kernel ($kimg); backend $backend"
t0=$(date +%s.%N)
: >"$log"
timeout --kill-after=5 "$timeout" "$qemu" \
  -machine q35,kernel-irqchip=split -accel "${NPVTEST_ACCEL:-tcg,thread=single}" -cpu qemu64 -m 1G -smp "${NPVTEST_SMP:-2}" \
  -device intel-iommu,intremap=on,caching-mode=on \
  -device pcie-root-port,id=rp1,chassis=1,slot=1,bus=pcie.0 -device edu,bus=rp1 \
  -device pcie-root-port,id=rp2,chassis=2,slot=2,bus=pcie.0 -device edu,bus=rp2 \
  -device pci-testdev \
  -kernel "$kimg" -initrd "$work/initrd.gz" -append "$append" \
  -display none -serial "file:$log" "${extra[@]}" -monitor "unix:$mon,server,nowait" \
  -no-reboot </dev/null >"$work/qemu.out" 2>&1 &
qpid=$!
# monitor CMD...: each command's output from QEMU's human monitor (python3; none without it)
monitor() {
  command -v python3 >/dev/null || { echo "(no python3: no monitor dump)"; return 0; }
  python3 "$here/qemu-monitor.py" "$mon" "$@" 2>&1 || true
}
stalled=0 last_size=0 last_move=$SECONDS longest=0
while kill -0 "$qpid" 2>/dev/null; do
  sleep 2
  size=$(stat -c %s "$log" 2>/dev/null || echo 0)
  if [ "$size" -ne "$last_size" ]; then
    [ $((SECONDS - last_move)) -le "$longest" ] || longest=$((SECONDS - last_move))
    last_size=$size last_move=$SECONDS
  elif [ $((SECONDS - last_move)) -ge "$stall" ] && kill -0 "$qpid" 2>/dev/null; then
    stalled=1
    {
      echo "# the serial console made no progress for ${stall}s; QEMU's view of the vCPUs"
      monitor "info cpus" "info registers -a" "info lapic 0" "info lapic 1" "info pic" "info irq"
      sleep 3
      monitor "info cpus" "info registers -a" "info lapic 0" "info lapic 1"
      [ -z "${NPVTEST_STALL_HOOK:-}" ] || "$NPVTEST_STALL_HOOK" "$mon" "$work" 2>&1 || true
    } >"$work/stall.txt"
    kill -TERM "$qpid" 2>/dev/null || true # timeout passes it on to QEMU
    break
  fi
done
set +e
wait "$qpid"
qrc=$?
set -e
[ -z "$mondir" ] || rm -rf "$mondir"
wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
echo "run-guest: qemu exited rc=$qrc after ${wall}s (longest console silence ${longest}s, stall limit ${stall}s); serial log $log"

# ---- verdict -------------------------------------------------------------------------
if [ ! -s "$log" ]; then
  cat "$work/qemu.out"
  [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ] && fail "the guest wrote nothing to its console within ${timeout}s"
  fail "QEMU did not start (rc=$qrc)"
fi
tr -d '\r' < "$log" > "$work/serial.txt"
grep -aE '^VMTEST (guest-up|bind|smbus|group|nodes|hugepages|run|exit)|^(not )?ok [0-9]|^# ' "$work/serial.txt" || true
pass=$(grep -acE '^ok [0-9]' "$work/serial.txt" || true)
failed=$(grep -acE '^not ok [0-9]' "$work/serial.txt" || true)
why=""
if [ "$stalled" -eq 1 ]; then
  running=$(grep -a '^VMTEST run ' "$work/serial.txt" | tail -1 | sed 's/^VMTEST run //')
  echo "run-guest: STALL: the guest's console made no progress for ${stall}s while running: ${running:-(no program yet)}; last line: $(grep -a . "$work/serial.txt" | tail -1)"
  echo "run-guest: STALL: vCPU registers in $work/stall.txt"
  why="$why; the guest stalled (no console output for ${stall}s)"
elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
  why="$why; the guest did not finish within ${timeout}s"
fi
grep -aq '^VMTEST done' "$work/serial.txt" || why="$why; the guest did not reach the end of /init"
ran=$(grep -ac '^VMTEST exit ' "$work/serial.txt" || true)
[ "$ran" -eq ${#progs[@]} ] || why="$why; $ran of ${#progs[@]} programs ran"
[ "$pass" -gt 0 ] || why="$why; no check passed"
# A program that failed without a "not ok" line (a crash) is a failure of its own.
bad_rc=$(grep -aE '^VMTEST exit .* rc=' "$work/serial.txt" | grep -av 'rc=0$' || true)
[ -z "$bad_rc" ] || [ "$failed" -gt 0 ] ||
  why="$why; nonzero exit without a failed check: $(echo "$bad_rc" | sed 's/^VMTEST exit //' | tr '\n' ' ')"
if [ -n "$why" ] || [ "$failed" -gt 0 ]; then
  echo "run-guest: --- the rest of the serial log (kernel log last) ---"
  grep -avE '^VMTEST (guest-up|bind|smbus|group|nodes|hugepages|run|exit)|^(not )?ok [0-9]|^# ' \
    "$work/serial.txt" | tail -60
  [ -z "$why" ] || { echo "run-guest: FAIL:${why#;}"; failed=$((failed + 1)); }
fi
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
