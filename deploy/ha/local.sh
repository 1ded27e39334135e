#!/usr/bin/env bash
# The three-host cluster of deploy/ha on this one machine, from the same
# files: the hosts 10.0.0.11-13 become the loopback addresses PREFIX11-13
# (127.0.0.11-13 by default) and HAProxy listens on PREFIX10:5000 (writes,
# the leader) and PREFIX10:5001 (reads, a standby). Everything lives under
# DIR: the passwords (payreq secrets database), etcd's and PostgreSQL's
# folders, the logs and the pid files.
#
#   deploy/ha/local.sh start DIR [PREFIX]   start (or reuse) it; the last line
#                                           printed is DATABASE_URL=…, also
#                                           written to DIR/database-url
#   deploy/ha/local.sh stop DIR             stop every process it started
#
# PAYREQ names the payreq binary (default bin/payreq). As root, Patroni and
# PostgreSQL run as postgres (Patroni refuses root).
set -euo pipefail

cmd=${1:?usage: local.sh start|stop DIR [PREFIX]}
dir=${2:?usage: local.sh start|stop DIR [PREFIX]}
prefix=${3:-127.0.0.}
here=$(cd "$(dirname "$0")" && pwd)
payreq=${PAYREQ:-bin/payreq}
members=(1 2 3)

# stop_pid ends the process whose pid FILE holds, waiting for it to exit.
stop_pid() {
	local file=$1 pid
	[ -s "$file" ] || return 0
	pid=$(cat "$file")
	if kill "$pid" 2>/dev/null; then
		for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$file"
}

if [ "$cmd" = stop ]; then
	[ -d "$dir" ] || exit 0
	stop_pid "$dir/haproxy.pid"
	for i in "${members[@]}"; do
		stop_pid "$dir/patroni$i.pid"
		# A Patroni that had to be killed leaves its PostgreSQL running.
		pm=$dir/pg$i/data/postmaster.pid
		[ -s "$pm" ] && kill -QUIT "$(head -1 "$pm")" 2>/dev/null || true
	done
	for i in "${members[@]}"; do stop_pid "$dir/etcd$i.pid"; done
	echo "stopped the cluster under $dir"
	exit 0
fi
[ "$cmd" = start ] || { echo "local.sh: unknown command $cmd (start, stop)" >&2; exit 2; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
secrets=$dir/secrets
[ -s "$secrets/postgres-payreq-password" ] || "$payreq" secrets database --dir "$secrets" >/dev/null
secret() { tr -d '\n' <"$secrets/$1"; }

# as_postgres runs a command as postgres when this is root, in a clean
# environment (a PGPASSWORD passed down breaks the standbys' replication);
# setpriv execs it, so $! is the command's own pid, which stop signals.
as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		exec setpriv --reuid=postgres --regid=postgres --init-groups -- env -i "$@"
	else
		exec env -i "$@"
	fi
}
# member FILE I: the host-1 environment file FILE as host I's, on loopback.
member() {
	sed -e "/_INITIAL_CLUSTER=\|_ETCD3_HOSTS=/!s/10\.0\.0\.11/10.0.0.1$2/g" \
		-e "s/^\(ETCD\|PATRONI\)_NAME=\([a-z]*\)1/\1_NAME=\2$2/" \
		-e "s/10\.0\.0\./$prefix/g" "$1" | grep -v '^#'
}
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

for i in "${members[@]}"; do
	running "$dir/etcd$i.pid" && continue
	# shellcheck disable=SC2046 # one variable a word
	env -i PATH="$PATH" $(member "$here/etcd.env" "$i" | sed "s|^ETCD_DATA_DIR=.*|ETCD_DATA_DIR=$dir/etcd$i|") \
		etcd >"$dir/etcd$i.log" 2>&1 &
	echo $! >"$dir/etcd$i.pid"
done

bindir=$(pg_config --bindir)
cp "$here/patroni.yml" "$dir/patroni.yml"
for i in "${members[@]}"; do
	running "$dir/patroni$i.pid" && continue
	mkdir -p "$dir/pg$i"
	chmod 700 "$dir/pg$i"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir" "$dir/pg$i" "$dir/patroni.yml"
	# shellcheck disable=SC2046 # one variable a word
	(as_postgres PATH="$PATH" HOME="$dir/pg$i" \
		$(member "$here/patroni.env" "$i" | sed -e "s|^PATRONI_POSTGRESQL_DATA_DIR=.*|PATRONI_POSTGRESQL_DATA_DIR=$dir/pg$i/data|" \
			-e "s|^PATRONI_POSTGRESQL_PGPASS=.*|PATRONI_POSTGRESQL_PGPASS=$dir/pg$i/pgpass|" \
			-e "s|^PATRONI_POSTGRESQL_BIN_DIR=.*|PATRONI_POSTGRESQL_BIN_DIR=$bindir|") \
		PATRONI_SUPERUSER_PASSWORD="$(secret postgres-superuser-password)" \
		PATRONI_REPLICATION_PASSWORD="$(secret postgres-replication-password)" \
		PATRONI_RESTAPI_USERNAME=patroni PATRONI_RESTAPI_PASSWORD="$(secret patroni-restapi-password)" \
		patroni "$dir/patroni.yml") >"$dir/patroni$i.log" 2>&1 &
	echo $! >"$dir/patroni$i.pid"
done

if ! running "$dir/haproxy.pid"; then
	sed -e "s/127\.0\.0\.1:500/${prefix}10:500/" -e "s/10\.0\.0\./$prefix/g" "$here/haproxy.cfg" >"$dir/haproxy.cfg"
	haproxy -D -f "$dir/haproxy.cfg" -p "$dir/haproxy.pid"
fi

# The cluster takes writes once a leader runs and, in strict synchronous
# mode, a standby confirms them: payreq's role and database are made then.
# A cold start takes 5-15 s.
super="postgres://postgres@${prefix}10:5000/postgres?sslmode=disable&connect_timeout=3"
PGPASSWORD=$(secret postgres-superuser-password)
export PGPASSWORD # psql's only: Patroni started above without it
for _ in $(seq 120); do
	if timeout 5 psql -qAtX "$super" -c "SELECT 1" >/dev/null 2>&1; then break; fi
	sleep 1
done
password=$(secret postgres-payreq-password)
timeout 60 psql -qAtX "$super" -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT format('CREATE ROLE payreq LOGIN PASSWORD %L', '$password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'payreq') \gexec
SELECT 'CREATE DATABASE payreq OWNER payreq'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'payreq') \gexec
SQL
url="postgres://payreq:$password@${prefix}10:5000/payreq?sslmode=disable"
(umask 077 && echo "$url" >"$dir/database-url")
echo "DATABASE_URL=$url"
