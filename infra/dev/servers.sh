#!/usr/bin/env bash
# Makes sure the servers ax needs on a development or CI machine answer:
# MariaDB/MySQL on 127.0.0.1:3306 and Redis on 127.0.0.1:6379. It starts the
# installed Debian servers when they are down, and installs them with apt when
# they are missing. NATS needs nothing here: `ax up` and the tests embed a
# current nats-server, and the Makefile builds a standalone one from the Go
# module for the multi-process tests.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port=$1 name=$2
  for _ in $(seq 1 100); do
    port_open "$port" && return 0
    sleep 0.2
  done
  echo "servers: $name did not come up on port $port" >&2
  return 1
}

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "servers: $* missing and not root; install it" >&2
    return 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! port_open 3306; then
  if [ ! -x /usr/sbin/mariadbd ]; then apt_install mariadb-server; fi
  echo "servers: starting MariaDB"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  wait_port 3306 MariaDB
fi

if ! port_open 6379; then
  if ! command -v redis-server >/dev/null; then apt_install redis-server; fi
  echo "servers: starting Redis"
  mkdir -p /var/lib/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /var/lib/redis
  wait_port 6379 Redis
fi

# The multi-process and Redis-restart tests start private redis-servers.
command -v redis-server >/dev/null || apt_install redis-server
echo "servers: MariaDB and Redis are up"
