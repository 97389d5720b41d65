# Sourced by the GPU scripts (check.sh, probe_small_copies.sh, ab_bench.sh): makes the repo root
# the working directory and sets where things are:
#   root    the repo root
#   deps    the carried Debian test libraries (fetch_deps.sh), prefix: where check.sh unpacks them
#   build   the GPU-only build (KVTWIN_PREBUILT: binaries built elsewhere)
#   out     the outputs ($OUT under the device tool; created)
# and puts the unpacked libraries (libbenchmark) on LD_LIBRARY_PATH.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 1
deps="$root/build/gpu-deps"
prefix="$deps/root"
build="${KVTWIN_PREBUILT:-$root/build/gpu}"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
