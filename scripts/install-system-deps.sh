#!/usr/bin/env bash
# Installs the system binaries the dashboard, rules and deployment tests need, from Debian
# packages:
#   prometheus              -> prometheus, promtool
#   prometheus-alertmanager -> prometheus-alertmanager (Debian's name for alertmanager), amtool
#   docker-compose          -> docker-compose (validates docker-compose.yml; no engine needed)
#   chromium                -> chromium (the live page's browser tests drive it with Playwright,
#                              whose own browser download needs the internet)
# Idempotent: does nothing when every binary is already on PATH. Needs root to install.
set -euo pipefail

declare -A PACKAGE_OF=(
  [prometheus]=prometheus
  [promtool]=prometheus
  [prometheus-alertmanager]=prometheus-alertmanager
  [amtool]=prometheus-alertmanager
  [docker-compose]=docker-compose
  [chromium]=chromium
)

declare -A missing=()
for bin in "${!PACKAGE_OF[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing[${PACKAGE_OF[$bin]}]=1
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
packages=("${!missing[@]}")

if [ "$EUID" -ne 0 ]; then
  echo "install-system-deps: missing ${packages[*]}; run this script as root" \
       "(or: sudo apt-get install ${packages[*]})" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: apt-get not found; install ${packages[*]} by hand" >&2
  exit 1
fi

echo "install-system-deps: installing ${packages[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: the packages recommend node exporters we do not need.
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# Debian's postinst may start the services; the tests start their own on free ports.
for svc in prometheus prometheus-alertmanager; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done
for bin in "${!PACKAGE_OF[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install-system-deps: $bin still missing" >&2; exit 1; }
done
