#!/bin/sh
# /init of the test guest (busybox). Prepares the devices the tests use, runs
# every program in /tests with the backend named on the kernel command line
# (npvtest.backend=legacy|iommufd), and powers off. Everything the host
# harness reads is a line on the serial console:
#   VMTEST ...           set-up facts and each program's exit status
#   ok N - ... / not ok N - ...   the programs' verdicts (TAP-like)
#   VMTEST done          the run finished (absent: the guest crashed or hung)
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp && mount -t tmpfs tmpfs /tmp
echo "VMTEST guest-up uptime=$(cut -d' ' -f1 /proc/uptime)s kernel=$(uname -r)"

arg() { # value of npvtest.<name>= on the kernel command line
  for w in $(cat /proc/cmdline); do
    case "$w" in "npvtest.$1="*) echo "${w#*=}"; return;; esac
  done
}

# Debug (npvtest.watch=SECS, run-guest.sh's NPVTEST_GUEST_WATCH): every SECS s,
# every task's state, wchan and kernel stack, and the interrupt counts, on the
# second serial port, to see where a stalled guest waits.
WATCH=$(arg watch)
if [ -n "$WATCH" ] && [ -c /dev/ttyS1 ]; then
  cat >/tmp/npvwatch.sh <<'EOF'
while :; do
  echo "=== uptime $(cut -d' ' -f1 /proc/uptime)"
  for p in /proc/[0-9]*; do
    st=$(sed -n 's/^State:\t//p' "$p/status" 2>/dev/null) && [ -n "$st" ] || continue
    echo "--- ${p#/proc/} $(cat "$p/comm" 2>/dev/null) [$st] wchan=$(cat "$p/wchan" 2>/dev/null)"
    case "$st" in S*|I*) [ -n "$(tr -d '\0' <"$p/cmdline" 2>/dev/null)" ] || continue ;; esac
    echo "    cmd: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) syscall: $(cat "$p/syscall" 2>/dev/null)"
    sed 's/^/    /' "$p/stack" 2>/dev/null
  done
  echo "--- interrupts"; cat /proc/interrupts
  [ -r /proc/timer_list ] && { echo "--- timer_list"; grep -E 'now at|^cpu:|expires_next|next_event|Clock Event|event_handler|^ #[0-9]|# expires at' /proc/timer_list; }
  sleep "$1"
done
EOF
  # On the last CPU: when one CPU's timer stops, its sleepers (a watcher
  # among them) stop with it; the other CPU can still tell.
  taskset $((1 << ($(grep -c ^processor /proc/cpuinfo) - 1))) sh /tmp/npvwatch.sh "$WATCH" >/dev/ttyS1 2>&1 &
fi

# Modules (Debian kernel only), in dependency order; like modprobe, pass
# "<module>.<param>=<value>" words from the command line on.
if [ -f /lib/modules/load-order ]; then
  for m in $(cat /lib/modules/load-order); do
    mu=$(echo "$m" | tr - _); args=""
    for w in $(cat /proc/cmdline); do
      case "$(echo "${w%%.*}" | tr - _)" in "$mu") [ "$w" != "${w#*.}" ] && args="$args ${w#*.}";; esac
    done
    insmod "/lib/modules/$m.ko" $args || echo "VMTEST insmod $m FAILED"
  done
fi

find_fns() { # every PCI function with vendor $1 device $2, in address order
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor")" = "$1" ] && [ "$(cat "$d/device")" = "$2" ] && echo "${d##*/}"
  done
}
find_fn() { find_fns "$1" "$2" | head -1; } # the first of them
driver_of() { basename "$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null)" 2>/dev/null; }
bind_vfio() {
  echo vfio-pci > "/sys/bus/pci/devices/$1/driver_override"
  [ -e "/sys/bus/pci/devices/$1/driver" ] && echo "$1" > "/sys/bus/pci/devices/$1/driver/unbind"
  echo "$1" > /sys/bus/pci/drivers_probe
  echo "VMTEST bind $1 -> $(driver_of "$1")"
}

# edu (1234:11e8): alone in its IOMMU group, on vfio-pci for the DMA tests.
# With the npuvfio CLI in the guest, `npuvfio bind` does it (and remembers
# that edu had no driver, in /run/npuvfio); the CLI test checks the result.
EDU=$(find_fn 0x1234 0x11e8)
if [ -n "$EDU" ] && [ -x /bin/npuvfio ]; then
  out=$(npuvfio bind "$EDU" 2>&1); rc=$?
  echo "VMTEST bind $EDU -> $(driver_of "$EDU") by npuvfio bind, rc=$rc: $out" | tr '\n' ' '; echo
elif [ -n "$EDU" ]; then
  bind_vfio "$EDU"
fi
# The second edu (behind its own root port, its own group): a second
# DMA-capable device for the programs that put two devices in one domain.
EDU2=$(find_fns 0x1234 0x11e8 | sed -n 2p)
[ -n "$EDU2" ] && bind_vfio "$EDU2"
# ICH9 SATA (8086:2922) shares a group with the ICH9 SMBus (8086:2930), which
# stays on i2c-i801: the group-viability test opens SATA and must be refused.
SATA=$(find_fn 0x8086 0x2922)
SMBUS=$(find_fn 0x8086 0x2930)
[ -n "$SATA" ] && bind_vfio "$SATA"
# pci-testdev (1b36:0005) stays on no driver: opening it must be refused.
TESTDEV=$(find_fn 0x1b36 0x0005)
[ -n "$SMBUS" ] && echo "VMTEST smbus $SMBUS driver=$(driver_of "$SMBUS")"
for g in /sys/kernel/iommu_groups/*; do
  m=""; for f in "$g"/devices/*; do m="$m ${f##*/}($(driver_of "${f##*/}"))"; done
  echo "VMTEST group ${g##*/}:$m"
done
echo "VMTEST nodes: $(ls /dev/vfio /dev/vfio/devices /dev/iommu 2>&1 | tr '\n' ' ')"
echo "VMTEST hugepages: $(cat /proc/sys/vm/nr_hugepages 2>/dev/null) x $(sed -n 's/Hugepagesize: *//p' /proc/meminfo)"

BACKEND=$(arg backend)
export NPVTEST_BACKEND=$BACKEND NPVTEST_EDU=$EDU NPVTEST_EDU2=$EDU2 NPVTEST_SATA=$SATA NPVTEST_SMBUS=$SMBUS NPVTEST_TESTDEV=$TESTDEV
for t in /tests/*; do
  [ -x "$t" ] || continue
  echo "VMTEST run ${t##*/} backend=$BACKEND uptime=$(cut -d' ' -f1 /proc/uptime)s"
  "$t"
  echo "VMTEST exit ${t##*/} rc=$?"
done
# the kernel log stays off the console (loglevel) so it cannot split verdict lines
echo "VMTEST kernel log (last 40 lines):"
dmesg | tail -40 | sed 's/^/VMTEST kmsg /'
echo "VMTEST done uptime=$(cut -d' ' -f1 /proc/uptime)s"
poweroff -f
