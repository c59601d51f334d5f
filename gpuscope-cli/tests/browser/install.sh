#!/usr/bin/env bash
# Installs Chromium and ChromeDriver from Debian's packages (/usr/bin/chromium,
# /usr/bin/chromedriver) for the memory viewer's browser test (tests/view_browser.rs).
# Exits 0 when both are there; 3 (with the reason on stderr) when they cannot be
# installed here (not root, no apt-get): the test then prints `skipped: <reason>`.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get on this machine to install chromium and chromium-driver" >&2
  exit 3
fi
if [ "$(id -u)" != 0 ]; then
  echo "not root: cannot apt-get install chromium chromium-driver" >&2
  exit 3
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
test -x /usr/bin/chromium && test -x /usr/bin/chromedriver
