# Cross-compiling the device side (tvm-rpc-server) for 64-bit ARM boards with Debian's
# gcc-aarch64-linux-gnu; jansson comes from the arm64 multiarch package (libjansson-dev:arm64).
# Used by scripts/build-aarch64.sh together with -DTT_DEVICE_ONLY=ON.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
