#!/usr/bin/env bash
# Run HERE (the Debian build machine), not on the GPU machine: puts the Debian packages that the
# GPU-only build needs into build/gpu-deps/ (ignored by git), so the device tool can carry them
# ("carry": ["build/gpu-deps"]). check.sh unpacks them there with dpkg -x into a prefix.
#
# The versions are the ones installed here, so both machines build against the same libraries.
# Packages already in apt's cache are copied; the others are fetched with apt-get download.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="${1:-$root/build/gpu-deps}"
pkgs=(libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev libbenchmark1debian
      libbenchmark-tools)
mkdir -p "$dest"
cd "$dest"
for p in "${pkgs[@]}"; do
  ver="$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)"
  if [ -z "$ver" ]; then
    echo "fetch_deps: $p is not installed here; run .ci/install-deps first" >&2
    exit 1
  fi
  file_ver="${ver//:/%3a}"
  if ls "$dest"/"${p}_${file_ver}"_*.deb >/dev/null 2>&1; then continue; fi
  cached="$(ls /var/cache/apt/archives/"${p}_${file_ver}"_*.deb 2>/dev/null | head -n1 || true)"
  if [ -n "$cached" ]; then
    cp "$cached" "$dest/"
  else
    apt-get download -q "$p=$ver" 2>&1 | grep -v "unsandboxed" >&2 || true
  fi
  ls "$dest"/"${p}_${file_ver}"_*.deb >/dev/null || { echo "fetch_deps: no .deb for $p" >&2; exit 1; }
done
du -sh "$dest" | awk '{print "fetch_deps: " $1 " in " $2}'
