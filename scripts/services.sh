#!/usr/bin/env bash
# Start local PostgreSQL when it is installed but not running (the tests start their own redis-server).
set -uo pipefail
if command -v pg_ctlcluster >/dev/null && ! pg_isready -h 127.0.0.1 -q 2>/dev/null; then
  for v in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$v" main start || echo "warning: could not start postgresql $v"
  done
fi
exit 0
