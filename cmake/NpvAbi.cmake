# The ABI of the shared libraries: one SONAME major for all of them, and one
# symbol version script (lib/npuvfio.map: node NPUVFIO_0.1, only npv_*
# exported). abi/*.abi holds the baseline scripts/check-abi.sh compares with.
#
# An incompatible change (a removed or changed function or type) raises
# NPUVFIO_SOVERSION and adds a new version node; scripts/check-abi.sh --update
# rewrites the baseline in the same change.
set(NPUVFIO_SOVERSION 0)
set(NPUVFIO_VERSION_SCRIPT ${PROJECT_SOURCE_DIR}/lib/npuvfio.map)

# npv_versioned_library(TARGET): SONAME lib<name>.so.${NPUVFIO_SOVERSION} and the version script.
function(npv_versioned_library target)
  set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${NPUVFIO_SOVERSION} LINK_DEPENDS ${NPUVFIO_VERSION_SCRIPT})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${NPUVFIO_VERSION_SCRIPT}")
endfunction()
