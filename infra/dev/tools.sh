#!/usr/bin/env bash
# Installs the Debian packages the tests drive beyond Go itself, when they are
# missing. Each line of TOOLS is "command package": the command that must be
# on PATH and the Debian package that provides it. Add a tool with one line.
#
#   promtool  checks the metric names, the alert rules and their unit tests
#             (infra/prometheus)
#   chromium  the headless browser the web console's tests drive
#             (services/submitter/console)
set -euo pipefail

TOOLS=(
  "promtool prometheus"
  "chromium chromium"
)

missing=()
for tool in "${TOOLS[@]}"; do
  read -r cmd pkg <<<"$tool"
  command -v "$cmd" >/dev/null || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "tools: missing ${missing[*]} and not root: install with apt-get install ${missing[*]}" >&2
  # Tests that need a missing tool skip locally and fail in CI.
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
echo "tools: installing ${missing[*]} (a few minutes the first time)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The prometheus package starts a Prometheus server on :9090; ax needs only
# its promtool.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
for tool in "${TOOLS[@]}"; do
  read -r cmd pkg <<<"$tool"
  command -v "$cmd" >/dev/null || { echo "tools: $pkg installed but $cmd is not on PATH" >&2; exit 1; }
done
