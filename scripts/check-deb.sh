#!/usr/bin/env bash
# Builds Lathe's Debian package with `cpack -G DEB` and checks that it would install and run on a
# clean Debian 12: the files it carries, its control fields, and that every shared library the two
# binaries link is provided by a package it declares (plus the Qt plugins loaded at run time).
#
#   scripts/check-deb.sh [BUILD_DIR] [--no-build]     (BUILD_DIR defaults to build/release)
#
# CTest runs it as test_deb_package (label "packaging") with --no-build. Exit status 0 = all good;
# every failed check is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
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
if [ "$NO_BUILD" = 0 ]; then cmake --build "$BUILD" --target lathe lathe-studio; fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
(cd "$BUILD" && cpack -G DEB -B "$WORK" >"$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log" >&2; echo "check-deb: cpack failed" >&2; exit 1; }
DEB=$(ls "$WORK"/*.deb)
echo "check-deb: built $(basename "$DEB") ($(du -h "$DEB" | cut -f1))"

FAILED=0
fail() { echo "check-deb: FAIL: $*" >&2; FAILED=1; }
field() { dpkg-deb --field "$DEB" "$1"; }

# Control fields.
[ "$(field Package)" = lathe ] || fail "Package is '$(field Package)', expected lathe"
VERSION=$(sed -n 's/^project(lathe VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$(field Version)" = "$VERSION" ] || fail "Version is '$(field Version)', expected $VERSION"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture is '$(field Architecture)'"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
[ -n "$(field Description)" ] || fail "no Description"
DEPENDS=$(field Depends)
echo "check-deb: Depends: $DEPENDS"
# Package names in Depends (alternatives included, versions dropped).
DEP_NAMES=$(echo "$DEPENDS" | tr ',|' '\n\n' | sed 's/(.*)//; s/^ *//; s/ *$//; s/:.*//' | grep -v '^$' | sort -u)
for pkg in libc6 libstdc++6 libqt6core6 libqt6gui6 libqt6widgets6 libqt6network6 \
           libqcustomplot2.1-qt6 libsentencepiece0 libicu72 qt6-qpa-plugins libqt6svg6; do
  echo "$DEP_NAMES" | grep -qx "$pkg" || fail "Depends lacks $pkg"
done

# Every declared package exists in the configured Debian archive (so apt can resolve it).
if command -v apt-cache >/dev/null; then
  for pkg in $DEP_NAMES; do
    apt-cache show "$pkg" >/dev/null 2>&1 || fail "Depends names $pkg, which apt cannot find"
  done
fi

# Files.
dpkg-deb --contents "$DEB" | awk '{print $NF}' | sed 's|^\./|/|' >"$WORK/contents"
for f in /usr/bin/lathe /usr/bin/lathe-studio \
         /usr/share/applications/org.lathe.Studio.desktop \
         /usr/share/metainfo/org.lathe.Studio.metainfo.xml \
         /usr/share/mime/packages/org.lathe.Studio.xml \
         /usr/share/icons/hicolor/scalable/apps/org.lathe.Studio.svg \
         /usr/share/icons/hicolor/48x48/apps/org.lathe.Studio.png \
         /usr/share/icons/hicolor/256x256/apps/org.lathe.Studio.png; do
  grep -qx "$f" "$WORK/contents" || fail "the package lacks $f"
done
if grep -E '^/(usr/local|home|root|tmp|work)/' "$WORK/contents"; then fail "files outside /usr"; fi

# Every linked library is provided by a declared dependency.
mkdir "$WORK/root"
dpkg-deb --extract "$DEB" "$WORK/root"
for bin in lathe lathe-studio; do
  exe="$WORK/root/usr/bin/$bin"
  [ -x "$exe" ] || { fail "/usr/bin/$bin is not executable"; continue; }
  for lib in $(objdump -p "$exe" | awk '/NEEDED/ {print $2}'); do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64|AArch64/ {print $NF; exit}')
    [ -n "$path" ] || path=$(ldd "$exe" | awk -v l="$lib" '$1 == l {print $3}')
    owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1 || true)
    [ -n "$owner" ] || owner=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1 || true)
    if [ -z "$owner" ]; then fail "$bin links $lib ($path), which no Debian package provides"; continue; fi
    echo "$DEP_NAMES" | grep -qx "$owner" || fail "$bin links $lib from $owner, which Depends does not declare"
  done
done

# Desktop file and the binaries themselves.
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$WORK/root/usr/share/applications/org.lathe.Studio.desktop" || fail "desktop-file-validate"
fi
grep -q '^Exec=lathe-studio' "$WORK/root/usr/share/applications/org.lathe.Studio.desktop" || fail "Exec is not lathe-studio"
grep -q '^Icon=org.lathe.Studio$' "$WORK/root/usr/share/applications/org.lathe.Studio.desktop" || fail "Icon is not org.lathe.Studio"
"$WORK/root/usr/bin/lathe" --version >/dev/null || fail "lathe --version does not run"
QT_QPA_PLATFORM=offscreen "$WORK/root/usr/bin/lathe-studio" --version >/dev/null || fail "lathe-studio --version does not run"

if [ "$FAILED" = 0 ]; then
  echo "check-deb: OK: $(grep -c . "$WORK/contents") entries; every linked library is declared"
fi
exit "$FAILED"
