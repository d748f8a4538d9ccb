#!/usr/bin/env bash
# Installs everything Lathe needs to build, test and run, from Debian 12 packages. Idempotent:
# packages already present are not reinstalled. Runs apt-get through sudo when not root.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  qt6-base-dev qt6-base-dev-tools qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
  qt6-qpa-plugins
  libsentencepiece-dev sentencepiece nlohmann-json3-dev libcpp-httplib-dev
  libcli11-dev libspdlog-dev libicu-dev
  xvfb xauth libgl1-mesa-dev imagemagick x11-apps
  python3 python3-venv python3-pip unzip curl
  dpkg-dev file
  clang-14 libclang-rt-14-dev  # fuzz targets and sanitizer builds (scripts/fuzz.sh, scripts/sanitize.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
