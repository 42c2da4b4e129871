#!/bin/sh
# guest_cli: the `npuvfio` command-line tool against the real kernel in the
# guest (busybox sh). /init has bound edu with `npuvfio bind`; this checks
# what that did, then list, info --open (text and JSON, auto and forced
# backend), unbind and bind again, and the refusal of a bind whose IOMMU group
# another function still holds on a host driver. One TAP line per check, like
# the C programs (guest_tap.h); edu is left on vfio-pci for the programs after.
B=${NPVTEST_BACKEND:-?}
EDU=$NPVTEST_EDU SATA=$NPVTEST_SATA SMBUS=$NPVTEST_SMBUS
STATE=/run/npuvfio
n=0 failed=0
out=/tmp/cli.out err=/tmp/cli.err

check() { # check RC "what": ok when RC is 0
  n=$((n + 1))
  if [ "$1" -eq 0 ]; then echo "ok $n - $B: cli: $2"; else echo "not ok $n - $B: cli: $2"; failed=$((failed + 1)); fi
}
diag() { echo "# $*"; }
# run ARGS...: npuvfio with stdout in $out, stderr in $err, exit status in $rc; both shown as diagnostics
run() {
  npuvfio "$@" >$out 2>$err
  rc=$?
  diag "\$ $* -> exit $rc"
  sed 's/^/#   | /' $out
  sed 's/^/#   ! /' $err
}
has() { grep -qE "$1" $out; }          # stdout matches an extended regex
err_lines() { grep -c . $err; }        # non-empty stderr lines
driver_of() { basename "$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null)" 2>/dev/null; }
group_of() { basename "$(readlink "/sys/bus/pci/devices/$1/iommu_group" 2>/dev/null)" 2>/dev/null; }
json_obj() { grep -o "{\"address\":\"$1\"[^}]*}" $out | head -1; } # the flat object of one function in list --json

[ -x /bin/npuvfio ] && [ -n "$EDU" ] && [ -n "$SATA" ] && [ -n "$SMBUS" ]
check $? "npuvfio is in the guest; edu ($EDU), ICH9 SATA ($SATA) and SMBus ($SMBUS) found"
[ -x /bin/npuvfio ] && [ -n "$EDU" ] || { echo "1..$n"; exit 1; }
GROUP=$(group_of "$EDU")

# ---- the bind /init did -------------------------------------------------------
[ "$(driver_of "$EDU")" = vfio-pci ] && [ "$(cat /sys/bus/pci/devices/$EDU/driver_override)" = vfio-pci ]
check $? "npuvfio bind at boot put edu on vfio-pci through driver_override (driver $(driver_of "$EDU"))"
[ -f "$STATE/$EDU" ] && [ -z "$(cat "$STATE/$EDU")" ]
check $? "bind remembered edu's previous driver as none: $STATE/$EDU holds an empty line"
run bind "$EDU"
[ $rc -eq 0 ] && has "already bound to vfio-pci"
check $? "a second bind says already bound and exits 0 (exit $rc)"

# ---- list ---------------------------------------------------------------------
run list
line=$(grep "^$EDU " $out)
set -- $line
[ $rc -eq 0 ] && [ "$2" = "1234:11e8" ] && [ "$4" = vfio-pci ] && [ "$5" = "$GROUP" ] && [ "$7" = yes ]
check $? "list: $EDU 1234:11e8 on vfio-pci in IOMMU group $GROUP, VFIO yes (row: $line)"
run list --json
obj=$(json_obj "$EDU")
echo "$obj" | grep -q '"driver":"vfio-pci"' && echo "$obj" | grep -q "\"iommu_group\":$GROUP," &&
  echo "$obj" | grep -q '"vfio_bound":true'
check $? "list --json: $obj"

# ---- info --open ----------------------------------------------------------------
# The backend the library picks by itself: iommufd exactly where the kernel has
# /dev/iommu and edu has a VFIO cdev (the build has iommufd: 6.12 uapi headers).
if [ -c /dev/iommu ] && [ -d "/sys/bus/pci/devices/$EDU/vfio-dev" ]; then auto=iommufd; else auto=legacy; fi
# QEMU's VT-d without snoop-control enforces no coherency (type1 says so;
# iommufd does not tell, and the library then assumes not). edu is
# conventional PCI (no PCIe capability), so there is no Enable No Snoop to clear.
info_text_checks() { # $1 = expected backend
  [ $rc -eq 0 ] && [ "$(err_lines)" -eq 0 ]
  check $? "info --open exits 0 with nothing on stderr (exit $rc)"
  has "^  driver: +vfio-pci$" && has "^  iommu group: +$GROUP$" && has "^  viable: +yes$"
  check $? "info: driver vfio-pci, group $GROUP, viable"
  has "^    backend: +$1$"
  check $? "info: backend $1"
  has "^      BAR0 +size 0x100000 +rwm mmap\[0x0\+0x100000\]$"
  check $? "info: BAR0 is 1 MiB, read/write, mmap of the whole BAR"
  has "^      CONFIG +size 0x[0-9a-f]+ +rw-$"
  check $? "info: config region read/write, not mmap"
  has "^      MSI +count 1 eventfd" && has "^      INTx +count 1 eventfd"
  check $? "info: IRQs MSI (1 vector) and INTx, both eventfd"
  has "^      0x[0-9a-f]{16}-0x[0-9a-f]{16}$"
  check $? "info: the domain's IOVA ranges are listed ($(grep -cE '^      0x[0-9a-f]{16}-' $out))"
  has "^    reset: +yes$"
  check $? "info: reset yes (edu alone behind a root port gets a bus reset)"
  has "^    coherent DMA: +no$" && has "^    no-snoop off: +no \(no PCIe capability: nothing to clear\)$"
  check $? "info: coherent DMA no (VT-d without snoop control), No Snoop not cleared (edu has no PCIe capability)"
}
info_json_checks() { # $1 = expected backend
  j=$(cat $out)
  [ $rc -eq 0 ] && [ "$(err_lines)" -eq 0 ] && [ "$(grep -c . $out)" -eq 1 ]
  check $? "info --open --json: exit 0, one line of JSON, nothing on stderr (exit $rc)"
  echo "$j" | grep -q "\"address\":\"$EDU\",\"vendor\":\"1234\",\"device\":\"11e8\",\"driver\":\"vfio-pci\"" &&
    echo "$j" | grep -q "\"iommu_group\":{\"id\":$GROUP,\"viable\":true," &&
    echo "$j" | grep -q '"vfio":{"opened":true,"backend":"'"$1"'","reset":true,"coherent":false,"no_snoop_cleared":false,'
  check $? "info --json: identity, group $GROUP viable, opened with backend $1, reset, coherency facts"
  echo "$j" | grep -q '{"index":0,"name":"BAR0","size":1048576,"read":true,"write":true,"mmap":true,"msix_mappable":false,"mmap_areas":\[{"offset":0,"size":1048576}\]}'
  check $? "info --json: BAR0 1048576 bytes with one mmap area over all of it"
  echo "$j" | grep -q '{"index":0,"name":"INTx","count":1,"eventfd":true,' &&
    echo "$j" | grep -q '{"index":1,"name":"MSI","count":1,"eventfd":true,'
  check $? "info --json: INTx and MSI with 1 vector each"
  echo "$j" | grep -qE '"iova_ranges":\[\{"start":[0-9]+,"last":[0-9]+\}'
  check $? "info --json: iova_ranges present"
}

run info --open "$EDU"
info_text_checks $auto
run info --open --json "$EDU"
info_json_checks $auto
# The backend forced through the environment (legacy on the custom kernel in the legacy run).
NPUVFIO_IOMMU=$B npuvfio info --open --json "$EDU" >$out 2>$err
rc=$?
diag "\$ NPUVFIO_IOMMU=$B npuvfio info --open --json $EDU -> exit $rc"
sed 's/^/#   | /' $out
sed 's/^/#   ! /' $err
info_json_checks "$B"
if [ ! -c /dev/iommu ]; then
  NPUVFIO_IOMMU=iommufd npuvfio info --open "$EDU" >$out 2>$err
  rc=$?
  sed 's/^/#   ! /' $err
  [ $rc -eq 1 ] && [ "$(err_lines)" -eq 1 ] && grep -q "^npuvfio info: $EDU: VFIO: " $err
  check $? "NPUVFIO_IOMMU=iommufd without /dev/iommu: exit 1, one error line ($(head -1 $err))"
fi

# ---- unbind, bind again ---------------------------------------------------------
run unbind "$EDU"
[ $rc -eq 0 ] && has "^$EDU: driver now none \(unbound\)$" && [ -z "$(driver_of "$EDU")" ]
check $? "unbind returns edu to its previous driver, none: left unbound (exit $rc)"
[ "$(cat /sys/bus/pci/devices/$EDU/driver_override)" = "(null)" ] && [ ! -e "$STATE/$EDU" ]
check $? "unbind cleared driver_override ($(cat /sys/bus/pci/devices/$EDU/driver_override)) and the state file"
run list
set -- $(grep "^$EDU " $out)
[ "$4" = - ] && [ "$7" = no ]
check $? "list shows edu with no driver, VFIO no"
run unbind "$EDU"
[ $rc -eq 0 ] && [ -z "$(driver_of "$EDU")" ]
check $? "unbind of an unbound function is a no-op, exit 0"
run info --open "$EDU"
[ $rc -eq 1 ] && [ "$(err_lines)" -eq 1 ] && grep -q "not bound to vfio-pci" $err
check $? "info --open of an unbound function: exit 1, one error line ($(head -1 $err))"
run bind "$EDU"
[ $rc -eq 0 ] && has "bound to vfio-pci \(was unbound\)" && [ "$(driver_of "$EDU")" = vfio-pci ]
check $? "bind after unbind works again (exit $rc)"
# Without a record, unbind lets drivers_probe choose: edu has no host driver, so none.
rm -f "$STATE/$EDU"
run unbind "$EDU"
[ $rc -eq 0 ] && [ -z "$(driver_of "$EDU")" ]
check $? "unbind without a state file: drivers_probe finds no driver for edu, left unbound"
run bind "$EDU"
[ $rc -eq 0 ] && [ "$(driver_of "$EDU")" = vfio-pci ]
check $? "bound again, for the programs after this one"
run info --open "$EDU"
[ $rc -eq 0 ] && has "^    backend: +$auto$"
check $? "info --open works after the unbind/bind cycle"

# ---- a group held by a host driver -----------------------------------------------
LPC=${SATA%.*}.0 # 00:1f.0, the ICH9 LPC bridge, in SATA's group
lpc_driver=$(driver_of "$LPC")
run bind "$LPC"
[ $rc -eq 1 ] && [ "$(err_lines)" -eq 1 ] && grep -q "$SMBUS (i801_smbus)" $err
check $? "bind $LPC is refused with exit 1 and one line naming $SMBUS (i801_smbus) ($(head -1 $err))"
[ "$(driver_of "$LPC")" = "$lpc_driver" ] && [ "$(cat /sys/bus/pci/devices/$LPC/driver_override)" = "(null)" ] &&
  [ ! -e "$STATE/$LPC" ]
check $? "the refused bind changed nothing: driver \"$lpc_driver\", no override, no state file"
run info "$SATA"
[ $rc -eq 0 ] && has "^  viable: +no: $SMBUS \(i801_smbus\) on a host driver$" && has "^    $SMBUS .*<- host driver, blocks VFIO$"
check $? "info $SATA names $SMBUS as the member blocking the group"
run info --open "$SATA"
[ $rc -eq 1 ] && [ "$(err_lines)" -eq 1 ] &&
  grep -q "^npuvfio info: $SATA: VFIO: cannot open: its IOMMU group is not viable: $SMBUS (driver i801_smbus) on a host driver" $err
check $? "info --open $SATA: exit 1, one error line saying why and naming $SMBUS ($(head -1 $err))"

echo "1..$n"
[ $failed -eq 0 ]
