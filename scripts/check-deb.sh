#!/usr/bin/env bash
# Builds Lathe's Debian packages with `cpack -G DEB` and checks that they would install and run on a
# clean Debian 12 (packaging/CMakeLists.txt makes them):
#   lathe        every build: /usr/bin/lathe, /usr/bin/lathe-studio, liblathe_engine.so in a private
#                lib folder, desktop files. Every shared library its ELF files link is in the
#                package itself or provided by a Debian package it declares (no CUDA library), every
#                declared package exists in apt, the binaries run from the extracted package, and
#                --device cuda there says what is missing.
#   lathe-cuda   CUDA builds: the plugin liblathe_cuda.so alone, next to liblathe_engine.so. Depends
#                on lathe of the same version; each CUDA library it links belongs to a declared NVIDIA
#                package (libcudart.so.N: cuda-cudart-N-M, libcublas(Lt).so.N: libcublas-N-M,
#                libcusolver.so.*: libcusolver-N-M of the toolkit's N, whose soname differs), every
#                other one to lathe or a declared Debian package; extracted next to lathe, the
#                engine finds it.
#
#   scripts/check-deb.sh [BUILD_DIR] [--no-build]     (BUILD_DIR defaults to build/release)
#
# CTest runs it as test_deb_package (label "packaging") with --no-build. Exit status 0 = all good;
# every failed check is printed.
set -euo pipefail
# Membership tests read here-strings (grep -q ... <<< "$X"), not "echo "$X" | grep -q": under
# pipefail the writer of a pipe whose reader quits early can die of SIGPIPE and fail the test
# (seen once under parallel ctest: a declared dependency reported as undeclared).
cd "$(dirname "$0")/.."
SRC=$PWD
BUILD=build/release
NO_BUILD=0
for arg in "$@"; do
  case "$arg" in
    --no-build) NO_BUILD=1 ;;
    *) BUILD="$arg" ;;
  esac
done
BUILD=$(cd "$BUILD" && pwd)
for tool in cpack dpkg-deb dpkg-shlibdeps objdump dpkg; do
  command -v "$tool" >/dev/null || { echo "check-deb: $tool is missing (apt-get install dpkg-dev binutils cmake)" >&2; exit 2; }
done
# A CUDA build packs the install component "cuda" too (packaging/CMakeLists.txt).
WITH_CUDA=0
grep -qE '^set\(CPACK_COMPONENTS_ALL ".*cuda' "$BUILD/CPackConfig.cmake" && WITH_CUDA=1
if [ "$NO_BUILD" = 0 ]; then cmake --build "$BUILD" --target lathe lathe-studio; fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
(cd "$BUILD" && cpack -G DEB -B "$WORK" >"$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log" >&2; echo "check-deb: cpack failed" >&2; exit 1; }
DEB=$(ls "$WORK"/lathe_*.deb)
CUDA_DEB=$(ls "$WORK"/lathe-cuda_*.deb 2>/dev/null || true)
for d in $DEB $CUDA_DEB; do echo "check-deb: built $(basename "$d") ($(du -h "$d" | cut -f1))"; done

FAILED=0
fail() { echo "check-deb: FAIL: $*" >&2; FAILED=1; }
VERSION=$(sed -n 's/^project(lathe VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
# Package names in a Depends field (alternatives included, versions dropped), one a line.
dep_names() { echo "$1" | tr ',|' '\n\n' | sed 's/(.*)//; s/^ *//; s/ *$//; s/:.*//' | grep -v '^$' | sort -u; }
# The Debian package that owns the library `$2` as `$1` (an extracted ELF file) resolves it.
lib_owner() {
  local path
  path=$(ldconfig -p | awk -v l="$2" '$1 == l && /x86-64|x86_64|AArch64/ && !f {print $NF; f = 1}')
  [ -n "$path" ] || path=$(ldd "$1" 2>/dev/null | awk -v l="$2" '$1 == l {print $3}')
  [ -n "$path" ] || return 0
  local owner
  owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | sed -n '1s/:.*//p' || true)
  [ -n "$owner" ] || owner=$(dpkg -S "$path" 2>/dev/null | sed -n '1s/:.*//p' || true)
  echo "$owner"
}
field() { dpkg-deb --field "$1" "$2"; }
check_control() {  # deb, expected package name
  [ "$(field "$1" Package)" = "$2" ] || fail "Package is '$(field "$1" Package)', expected $2"
  [ "$(field "$1" Version)" = "$VERSION" ] || fail "$2: Version is '$(field "$1" Version)', expected $VERSION"
  [ "$(field "$1" Architecture)" = "$(dpkg --print-architecture)" ] || fail "$2: Architecture is '$(field "$1" Architecture)'"
  [ -n "$(field "$1" Maintainer)" ] || fail "$2: no Maintainer"
  [ -n "$(field "$1" Description)" ] || fail "$2: no Description"
  if [[ "$(field "$1" Description)" == *';'* ]]; then fail "$2: Description has a ';' (a CMake list?)"; fi
}
contents() { dpkg-deb --contents "$1" | awk '{print $NF}' | sed 's|^\./|/|'; }

# ---- lathe ----------------------------------------------------------------------------------------
check_control "$DEB" lathe
DEPENDS=$(dpkg-deb --field "$DEB" Depends)
echo "check-deb: lathe Depends: $DEPENDS"
DEP_NAMES=$(dep_names "$DEPENDS")
for pkg in libc6 libstdc++6 libqt6core6 libqt6gui6 libqt6widgets6 libqt6network6 \
           libqcustomplot2.1-qt6 libsentencepiece0 libicu72 qt6-qpa-plugins libqt6svg6; do
  grep -qx "$pkg" <<< "$DEP_NAMES" || fail "lathe: Depends lacks $pkg"
done
# Every declared package exists in the configured Debian archive (so apt can resolve it).
if command -v apt-cache >/dev/null; then
  for pkg in $DEP_NAMES; do
    apt-cache show "$pkg" >/dev/null 2>&1 || fail "lathe: Depends names $pkg, which apt cannot find"
  done
fi

contents "$DEB" >"$WORK/contents"
for f in /usr/bin/lathe /usr/bin/lathe-studio \
         /usr/share/applications/org.lathe.Studio.desktop \
         /usr/share/metainfo/org.lathe.Studio.metainfo.xml \
         /usr/share/mime/packages/org.lathe.Studio.xml \
         /usr/share/icons/hicolor/scalable/apps/org.lathe.Studio.svg \
         /usr/share/icons/hicolor/48x48/apps/org.lathe.Studio.png \
         /usr/share/icons/hicolor/256x256/apps/org.lathe.Studio.png; do
  grep -qx "$f" "$WORK/contents" || fail "lathe lacks $f"
done
if grep -E '^/(usr/local|home|root|tmp|work)/' "$WORK/contents"; then fail "lathe: files outside /usr"; fi
ENGINE_LIB=$(grep -E '^/usr/lib/(.+/)?lathe/liblathe_engine\.so$' "$WORK/contents" | head -1 || true)
[ -n "$ENGINE_LIB" ] || fail "lathe lacks liblathe_engine.so in a private folder (/usr/lib/[<triplet>/]lathe/)"
PRIVATE_DIR=$(dirname "${ENGINE_LIB:-/usr/lib/lathe/x}")
if grep -qE '/liblathe_cuda\.so$' "$WORK/contents"; then fail "lathe holds liblathe_cuda.so (it belongs in lathe-cuda)"; fi

# Every linked library is in the package or provided by a declared dependency; the binaries find
# liblathe_engine.so through their RUNPATH.
ROOT="$WORK/root"
mkdir "$ROOT"
dpkg-deb --extract "$DEB" "$ROOT"
ELF_FILES="/usr/bin/lathe /usr/bin/lathe-studio $PRIVATE_DIR/liblathe_engine.so"
for rel in $ELF_FILES; do
  elf="$ROOT$rel"
  [ -f "$elf" ] || { fail "lathe: $rel is missing"; continue; }
  case "$rel" in /usr/bin/*) [ -x "$elf" ] || fail "$rel is not executable" ;; esac
  for lib in $(objdump -p "$elf" | awk '/NEEDED/ {print $2}'); do
    if [ -e "$ROOT$PRIVATE_DIR/$lib" ]; then
      resolved=$(ldd "$elf" | awk -v l="$lib" '$1 == l && $3 != "not" {print $3}')
      [ -n "$resolved" ] && [ "$(realpath -m "$resolved")" = "$(realpath -m "$ROOT$PRIVATE_DIR/$lib")" ] ||
        fail "$rel: $lib resolves to '${resolved:-nothing}', not the package's $PRIVATE_DIR/$lib (RUNPATH: $(objdump -p "$elf" | awk '/RUNPATH|RPATH/ {print $2}'))"
      continue
    fi
    owner=$(lib_owner "$elf" "$lib")
    if [ -z "$owner" ]; then fail "$rel links $lib, which no Debian package provides"; continue; fi
    grep -qx "$owner" <<< "$DEP_NAMES" || fail "$rel links $lib from $owner, which Depends does not declare"
  done
done

# Desktop file and the binaries themselves.
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$ROOT/usr/share/applications/org.lathe.Studio.desktop" || fail "desktop-file-validate"
fi
grep -q '^Exec=lathe-studio' "$ROOT/usr/share/applications/org.lathe.Studio.desktop" || fail "Exec is not lathe-studio"
grep -q '^Icon=org.lathe.Studio$' "$ROOT/usr/share/applications/org.lathe.Studio.desktop" || fail "Icon is not org.lathe.Studio"
run() { env -u LATHE_CUDA_PLUGIN -u LD_LIBRARY_PATH QT_QPA_PLATFORM=offscreen "$@"; }
run "$ROOT/usr/bin/lathe" --version >/dev/null || fail "lathe --version does not run"
run "$ROOT/usr/bin/lathe-studio" --version >/dev/null || fail "lathe-studio --version does not run"
# --device cuda from the package alone: says why there is no GPU backend (CUDA build: install lathe-cuda).
MODEL="$SRC/tests/fixtures/model/tiny_llama.gguf"
cuda_says() { run "$ROOT/usr/bin/lathe" generate -m "$MODEL" --device cuda -n 1 -p hi 2>&1 || true; }
SAYS=$(cuda_says)
if [ "$WITH_CUDA" = 1 ]; then
  grep -q "install the lathe-cuda package" <<< "$SAYS" || fail "lathe alone, --device cuda does not say to install lathe-cuda: $SAYS"
else
  grep -q "no CUDA backend" <<< "$SAYS" || fail "CPU-only lathe, --device cuda does not say there is no CUDA backend: $SAYS"
fi

# ---- lathe-cuda -----------------------------------------------------------------------------------
if [ "$WITH_CUDA" = 1 ] && [ -z "$CUDA_DEB" ]; then fail "a CUDA build made no lathe-cuda package"; fi
if [ -n "$CUDA_DEB" ]; then
  check_control "$CUDA_DEB" lathe-cuda
  CDEPENDS=$(dpkg-deb --field "$CUDA_DEB" Depends)
  echo "check-deb: lathe-cuda Depends: $CDEPENDS"
  CDEP_NAMES=$(dep_names "$CDEPENDS")
  # The toolkit's major version (cuda-cudart-N-M); cuSOLVER's soname does not carry it.
  CUDA_MAJOR=$(grep -oE '^cuda-cudart-[0-9]+' <<< "$CDEP_NAMES" | head -1 | sed 's/^cuda-cudart-//' || true)
  grep -qE "(^|, )lathe \(= $VERSION\)(,|$)" <<< "$CDEPENDS" || fail "lathe-cuda does not depend on lathe (= $VERSION)"
  contents "$CUDA_DEB" >"$WORK/cuda-contents"
  grep -qx "$PRIVATE_DIR/liblathe_cuda.so" "$WORK/cuda-contents" || fail "lathe-cuda lacks $PRIVATE_DIR/liblathe_cuda.so (next to liblathe_engine.so)"
  others=$(grep -vE '/$' "$WORK/cuda-contents" | grep -vx "$PRIVATE_DIR/liblathe_cuda.so" | grep -v '^/usr/share/doc/' || true)
  [ -z "$others" ] || fail "lathe-cuda holds more than the plugin: $others"
  CROOT="$WORK/cuda-root"
  mkdir "$CROOT"
  dpkg-deb --extract "$CUDA_DEB" "$CROOT"
  plugin="$CROOT$PRIVATE_DIR/liblathe_cuda.so"
  NVIDIA_DEBS=""
  for lib in $(objdump -p "$plugin" | awk '/NEEDED/ {print $2}'); do
    case "$lib" in
      liblathe_engine.so) grep -qx lathe <<< "$CDEP_NAMES" || fail "lathe-cuda links $lib but does not depend on lathe"; continue ;;
      libcudart.so.*) want="cuda-cudart-${lib##*.so.}" ;;
      libcublas.so.*|libcublasLt.so.*) want="libcublas-${lib##*.so.}" ;;
      libcusolver.so.*) want="libcusolver-$CUDA_MAJOR" ;;
      *) want="" ;;
    esac
    owner=$(lib_owner "$plugin" "$lib")
    if [ -n "$want" ]; then  # a CUDA library: from NVIDIA's repository, package <name>-<major>-<minor>
      pkg=$(echo "$CDEP_NAMES" | grep -E "^$want-[0-9]+$" | head -1 || true)
      if [ -z "$pkg" ]; then fail "lathe-cuda links $lib but declares no $want-<minor> package"; continue; fi
      NVIDIA_DEBS="$NVIDIA_DEBS $pkg"
      [ -z "$owner" ] || [ "$owner" = "$pkg" ] || grep -qx "$owner" <<< "$CDEP_NAMES" ||
        fail "lathe-cuda links $lib from $owner, which Depends does not declare"
      continue
    fi
    if [ -z "$owner" ]; then fail "lathe-cuda links $lib, which no Debian package provides"; continue; fi
    grep -qx "$owner" <<< "$CDEP_NAMES" || fail "lathe-cuda links $lib from $owner, which Depends does not declare"
  done
  # cuSOLVER's own libraries (the plugin does not link them itself): NVIDIA packages too.
  for pkg in $(grep -E '^(libcusparse|libnvjitlink)-[0-9]+-[0-9]+$' <<< "$CDEP_NAMES" || true); do
    NVIDIA_DEBS="$NVIDIA_DEBS $pkg"
  done
  # Declared packages: Debian ones must be in apt; NVIDIA's only when its repository is configured.
  if command -v apt-cache >/dev/null; then
    for pkg in $CDEP_NAMES; do
      [ "$pkg" = lathe ] && continue
      if grep -qx "$pkg" <<< "${NVIDIA_DEBS// /$'\n'}"; then
        apt-cache show "$pkg" >/dev/null 2>&1 ||
          echo "check-deb: note: $pkg is in NVIDIA's apt repository, which is not configured here (not looked up)"
        continue
      fi
      apt-cache show "$pkg" >/dev/null 2>&1 || fail "lathe-cuda: Depends names $pkg, which apt cannot find"
    done
  fi
  # Installed together, the engine finds the plugin next to itself: no "install lathe-cuda" any more
  # (without a GPU it says why: no driver, or which CUDA library is missing).
  dpkg-deb --extract "$CUDA_DEB" "$ROOT"
  SAYS=$(cuda_says)
  if grep -q "install the lathe-cuda package" <<< "$SAYS"; then
    fail "lathe + lathe-cuda extracted together, the engine does not find the plugin: $SAYS"
  else
    echo "check-deb: lathe + lathe-cuda, --device cuda here: $(echo "$SAYS" | grep -iE 'cuda|gpu' | tail -1)"
  fi
fi

if [ "$FAILED" = 0 ]; then
  echo "check-deb: OK: lathe $(grep -c . "$WORK/contents") entries${CUDA_DEB:+, lathe-cuda $(grep -c . "$WORK/cuda-contents") entries}; every linked library is declared"
fi
exit "$FAILED"
