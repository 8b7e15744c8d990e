#!/usr/bin/env bash
# make arm64-check: the edge and the decoder on aarch64 (an arm64 Debian userland run by
# qemu-user, no binfmt_misc needed), their streams and decoded scaffolds compared with
# x86_64's, from the same wheel of this checkout (issue 52).
#
# Everything it needs it sets up itself, under ARM64_DIR (default ~/.cache/semcodec/arm64):
#   - qemu-user-static and debootstrap: `apt-get download`ed and unpacked there (no system
#     package is installed); debootstrap's first stage (--foreign) needs root;
#   - an arm64 Debian bookworm userland (python3.11), its packages unpacked, none configured;
#   - PyPI's aarch64 wheels of the versions this .venv has (`pip install --target` with
#     --platform, run by this machine's pip), the CUDA libraries included: the aarch64 torch
#     on PyPI is a CUDA build and will not import without them;
#   - compressai's extensions (PyPI has no aarch64 wheel of compressai 1.2.8), cross-compiled
#     with Debian's aarch64 g++ (also downloaded and unpacked there).
# Under qemu-user the guest sees the host's /proc/cpuinfo and /sys (x86_64), on which
# torch's CPU probing crashes; an aarch64 /proc/cpuinfo and cpu entries in the userland are
# read instead (qemu looks a guest's absolute path up in its -L prefix first).
#
# Then, for the sample's first ARM64_FRAMES frames (default 8), x86_64 (this .venv's python)
# and aarch64 each run `edge-agent encode` at level 1 and in detect mode (ARM64_MODES: one of
# them, e.g. ARM64_MODES=level1) and
# `cloud-decoder decode` of each stream; it prints the streams' sha256 and the decoded
# scaffolds' digests side by side and exits 1 when one differs. Results: ARM64_OUT
# (default runs/arm64). CPU-heavy (emulation is slow): it runs under nice.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${ARM64_DIR:-$HOME/.cache/semcodec/arm64}
OUT=${ARM64_OUT:-$REPO/runs/arm64}
FRAMES=${ARM64_FRAMES:-8}
MODES=${ARM64_MODES:-level1 detect}
HOST_PY=${HOST_PYTHON:-$REPO/.venv/bin/python}
MIRROR=${ARM64_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ROOT=$WORK/root
NICE="nice -n 10"
mkdir -p "$WORK" "$OUT"
say() { printf 'arm64-check: %s\n' "$*" >&2; }

# ------------------------------------------------------------------ host tools, unpacked
TOOLS=$WORK/tools
if [ ! -x "$TOOLS/usr/bin/qemu-aarch64-static" ] || [ ! -x "$TOOLS/usr/bin/aarch64-linux-gnu-g++-12" ]; then
  say "downloading qemu-user-static, debootstrap and the aarch64 cross g++ (Debian packages)"
  mkdir -p "$WORK/debs" "$TOOLS"
  (cd "$WORK/debs" && apt-get download qemu-user-static debootstrap \
     g++-12-aarch64-linux-gnu gcc-12-aarch64-linux-gnu cpp-12-aarch64-linux-gnu \
     gcc-12-aarch64-linux-gnu-base binutils-aarch64-linux-gnu libstdc++-12-dev-arm64-cross \
     libgcc-12-dev-arm64-cross libc6-dev-arm64-cross libc6-arm64-cross \
     linux-libc-dev-arm64-cross libgcc-s1-arm64-cross libstdc++6-arm64-cross)
  for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$TOOLS"; done
fi
QEMU=$TOOLS/usr/bin/qemu-aarch64-static

# ------------------------------------------------------------------ the arm64 userland
if [ ! -x "$ROOT/usr/bin/python3.11" ]; then
  say "bootstrapping arm64 Debian $SUITE into $ROOT (first stage only)"
  DEBOOTSTRAP_DIR=$TOOLS/usr/share/debootstrap $NICE "$TOOLS/usr/sbin/debootstrap" --foreign \
    --arch=arm64 --variant=minbase --include=python3.11,libpython3.11-dev \
    "$SUITE" "$ROOT" "$MIRROR" > "$WORK/debootstrap.log"
  # the second stage would run the packages' scripts (it needs binfmt_misc); unpacking is
  # all python3.11 needs
  for deb in "$ROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
fi
# what torch's CPU probing reads: an aarch64 CPU (Cortex-A78AE, a Jetson Orin's core)
mkdir -p "$ROOT/proc" "$ROOT/sys/devices/system/cpu/cpu0/regs/identification"
printf 'processor\t: 0\nBogoMIPS\t: 62.50\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd42\nCPU revision\t: 1\n\n' \
  > "$ROOT/proc/cpuinfo"
for f in possible present online; do echo 0 > "$ROOT/sys/devices/system/cpu/$f"; done
echo 0x00000000410fd421 > "$ROOT/sys/devices/system/cpu/cpu0/regs/identification/midr_el1"

# ------------------------------------------------------------------ the same wheels
PLATS=(--platform manylinux2014_aarch64 --platform linux_aarch64)
for i in $(seq 17 36); do PLATS+=(--platform "manylinux_2_${i}_aarch64"); done
PIP=("$HOST_PY" -m pip install --quiet --disable-pip-version-check --no-deps
     --only-binary=:all: "${PLATS[@]}" --python-version 3.11 --implementation cp
     --abi cp311 --abi abi3 --abi none)
"$HOST_PY" "$REPO/tools/arm64/pins.py" > "$WORK/pins.txt"
# what site/ was built from: the pins and compressai's build (a change rebuilds it)
{ cat "$WORK/pins.txt"; echo "# compressai extensions: -DNDEBUG -fwrapv -std=c++17 -O3"; } > "$WORK/site.want"
if ! cmp -s "$WORK/site.want" "$WORK/site.pins" 2>/dev/null; then
  say "installing aarch64 wheels of $(wc -l < "$WORK/pins.txt") pinned packages (a few GB)"
  rm -rf "$WORK/site" "$WORK/site-cuda"
  grep -Ev '^(compressai|nvidia|cuda|triton)' "$WORK/pins.txt" > "$WORK/pins-site.txt"
  grep -E '^(nvidia|cuda|triton)' "$WORK/pins.txt" > "$WORK/pins-cuda.txt"
  $NICE "${PIP[@]}" --target "$WORK/site" -r "$WORK/pins-site.txt"
  $NICE "${PIP[@]}" --target "$WORK/site-cuda" -r "$WORK/pins-cuda.txt"
  # compressai: its sdist's Python and its two extensions, cross-compiled as pip builds them
  # from its setup.py: Python's own flags first (sysconfig's OPT: -DNDEBUG -fwrapv; -g left
  # out), then setup.py's (-std=c++17 -O3, the ryg_rans headers) and pybind11's. -DNDEBUG
  # matters: semcodec's tables carry an unreachable slot past 2**16 (codec/entropy/rans.py,
  # CdfTable._native) that compressai's assert_cdfs would abort on; PyPI's x86_64 wheel is
  # built without assertions, as pip builds it with CPython's flags (issue 52)
  version=$(sed -n 's/^compressai==//p' "$WORK/pins.txt")
  "$HOST_PY" -m pip download --quiet --no-deps --no-binary=:all: -d "$WORK/sdist" "compressai==$version"
  rm -rf "$WORK/src" && mkdir -p "$WORK/src"
  tar -xzf "$WORK/sdist/compressai-$version.tar.gz" -C "$WORK/src"
  src=$WORK/src/compressai-$version
  export LD_LIBRARY_PATH=$TOOLS/usr/lib/x86_64-linux-gnu
  CXX=("$TOOLS/usr/bin/aarch64-linux-gnu-g++-12" --sysroot="$TOOLS" -shared -fPIC
       -fvisibility=hidden -DNDEBUG -fwrapv -Wall -std=c++17 -O3
       -I"$ROOT/usr/include/python3.11" -I"$ROOT/usr/include" -I"$WORK/site/pybind11/include")
  $NICE "${CXX[@]}" -I"$src/third_party/ryg_rans" -I"$src/compressai/cpp_exts/rans" \
    "$src/compressai/cpp_exts/rans/rans_interface.cpp" \
    -o "$src/compressai/ans.cpython-311-aarch64-linux-gnu.so"
  $NICE "${CXX[@]}" "$src/compressai/cpp_exts/ops/ops.cpp" -o "$src/compressai/_CXX.cpython-311-aarch64-linux-gnu.so"
  unset LD_LIBRARY_PATH
  cp -r "$src/compressai" "$WORK/site/"
  cp "$WORK/site.want" "$WORK/site.pins"
fi

# ------------------------------------------------------------------ this checkout's wheel
# built from a commit (ARM64_REV, default HEAD: not the working tree's uncommitted files,
# nor setuptools' build/, which can hold moved modules), installed for both machines
REV=${ARM64_REV:-HEAD}
say "building the semcodec wheel of $(git -C "$REPO" rev-parse --short "$REV")"
rm -rf "$WORK/wheel" && mkdir -p "$WORK/wheel/src"
git -C "$REPO" archive "$REV" | tar -x -C "$WORK/wheel/src"
"$HOST_PY" -m pip wheel --quiet --no-deps -w "$WORK/wheel/dist" "$WORK/wheel/src" 2>/dev/null
for site in semcodec-arm64 semcodec-x86_64; do
  rm -rf "${WORK:?}/$site"
  "$HOST_PY" -m pip install --quiet --no-deps --target "$WORK/$site" "$WORK"/wheel/dist/semcodec-*.whl
done

# ------------------------------------------------------------------ run both
LIBS=$(find "$WORK/site-cuda" -name '*.so*' -path '*lib*' -printf '%h\n' | sort -u | paste -sd:)
SAMPLE=$WORK/semcodec-x86_64/semcodec/datasets/sample/PETS09-S2L1-384x288
MODELS=${SEMCODEC_MODELS_DIR:-$HOME/.cache/semcodec/models}
run_x86() {
  (cd "$OUT" && PYTHONPATH=$WORK/semcodec-x86_64 SEMCODEC_MODELS_DIR=$MODELS OMP_NUM_THREADS=1 \
    $NICE "$HOST_PY" "$@")
}
run_arm() {
  (cd "$OUT" && QEMU_LD_PREFIX=$ROOT QEMU_CPU=cortex-a72 LD_LIBRARY_PATH=$LIBS \
    PYTHONPATH=$WORK/semcodec-arm64:$WORK/site:$WORK/site-cuda SEMCODEC_MODELS_DIR=$MODELS \
    OMP_NUM_THREADS=1 $NICE "$QEMU" -L "$ROOT" "$ROOT/usr/bin/python3.11" "$@")
}
run_arm -c "import platform; assert platform.machine() == 'aarch64', platform.machine()"
# the entropy coders' tables and rANS payloads first (seconds): a difference there is found
# before the long runs
say "the entropy tables and payloads on both"
run_x86 "$REPO/tools/arm64/tables.py" > "$OUT/tables-x86_64.txt"
run_arm "$REPO/tools/arm64/tables.py" > "$OUT/tables-arm64.txt"
if ! diff <(tail -n +2 "$OUT/tables-x86_64.txt") <(tail -n +2 "$OUT/tables-arm64.txt") >&2; then
  say "the entropy tables or payloads differ (above: x86_64 <, arm64 >)"
  exit 1
fi
say "$(($(wc -l < "$OUT/tables-arm64.txt") - 1)) tables and payloads equal"
for arch in x86_64 arm64; do
  runner=run_x86; [ "$arch" = arm64 ] && runner=run_arm
  for mode in $MODES; do
    flags=(--level 1); [ "$mode" = detect ] && flags=(--mode detect)
    say "$arch: encode ($mode, $FRAMES frames) and decode"
    start=$(date +%s)
    $runner -m semcodec.edge.cli encode "$SAMPLE" "${flags[@]}" --frames "$FRAMES" --threads 1 \
      --no-progress -q -o "$OUT/$arch-$mode.semc"
    rm -rf "${OUT:?}/$arch-$mode"
    $runner -m semcodec.cloud.cli decode "$OUT/$arch-$mode.semc" -o "$OUT/$arch-$mode" -q
    echo "$arch $mode $(( $(date +%s) - start ))" >> "$OUT/seconds.txt"
  done
done
# shellcheck disable=SC2086
"$HOST_PY" "$REPO/tools/arm64/compare.py" "$OUT" $MODES
