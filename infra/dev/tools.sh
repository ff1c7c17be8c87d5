#!/usr/bin/env bash
# Installs the tools the tests use beyond Go and the servers: promtool
# (Debian's `prometheus` package), which checks the metric names, the alert
# rules and their unit tests. Run by `make tools`, which `make test` needs.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "tools: promtool missing and not root; install Debian's prometheus package" >&2
  exit 1
fi
echo "tools: installing promtool (Debian package prometheus)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package starts a Prometheus server on :9090; ax needs only the tool.
if command -v systemctl >/dev/null 2>&1; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
command -v promtool >/dev/null
