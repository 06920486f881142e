#!/usr/bin/env bash
# Installs the Debian `chromium` package for the headless console tests (test/e2e/console*.live.test.ts).
# Idempotent: does nothing when chromium is already on PATH. Called by .ci/run before `npm ci && npm test`.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
