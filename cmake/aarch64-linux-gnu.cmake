# Cross-compiling for arm64 with Debian's cross toolchain (gcc-aarch64-linux-gnu)
# against the multiarch arm64 -dev packages (check:arm64, liburing-dev:arm64,
# libhwloc-dev:arm64; see scripts/install-deps.sh). Tests run under
# qemu-aarch64-static (scripts/run-arm64-tests.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch puts the arm64 libraries' headers in /usr/include (shared) and
# /usr/include/aarch64-linux-gnu; the cross compiler's own libc and kernel
# headers (/usr/aarch64-linux-gnu/include) stay first.
set(CMAKE_C_FLAGS_INIT "-isystem /usr/include/aarch64-linux-gnu -idirafter /usr/include")
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "-L/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,/usr/lib/aarch64-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${CMAKE_EXE_LINKER_FLAGS_INIT}")

set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# ctest runs the test executables through the emulator; the arm64 loader and
# libc come from libc6:arm64 (multiarch), the libraries from /usr/lib/aarch64-linux-gnu.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
