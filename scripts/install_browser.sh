#!/bin/sh
# The headless browser that tests/grading/test_html_report.py opens report.html in: chromium and
# its chromedriver. Installed with apt-get (Debian's `chromium`, `chromium-driver`) when they are
# missing and this is root with apt-get; otherwise, or with --check-only (an air-gapped install:
# apt-get needs the network), a note says what to install. Selenium is told the driver's path,
# so nothing is ever downloaded at test time.
set -eu
browser=${TOOLSWEEP_CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
driver=${TOOLSWEEP_CHROMEDRIVER:-$(command -v chromedriver || true)}
if [ -n "$browser" ] && [ -n "$driver" ]; then
  exit 0
fi
if [ "${1:-}" != "--check-only" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver
else
  echo "note: no chromium and chromedriver on PATH: the report.html browser test fails under 'make test'." >&2
  echo "      Install them (Debian, as root: apt-get install chromium chromium-driver) or set" >&2
  echo "      TOOLSWEEP_CHROMIUM and TOOLSWEEP_CHROMEDRIVER to a Chrome/Chromium and its matching driver." >&2
fi
