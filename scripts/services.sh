#!/usr/bin/env bash
# Start local Redis and PostgreSQL when they are installed but not running.
set -uo pipefail
if command -v redis-server >/dev/null && ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || echo "warning: could not start redis"
fi
if command -v pg_ctlcluster >/dev/null && ! pg_isready -h 127.0.0.1 -q 2>/dev/null; then
  for v in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$v" main start || echo "warning: could not start postgresql $v"
  done
fi
exit 0
