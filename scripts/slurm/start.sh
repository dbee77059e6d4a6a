#!/usr/bin/env bash
# A one-host Slurm for tests and CI: munged, slurmctld and slurmd (Debian's slurm-wlm 22.05), all
# state, logs, pids, sockets and the munge key inside STATE_DIR; no cgroups. slurmdbd keeps the jobs'
# history in a MariaDB of its own (STATE_DIR/db, on a socket and a port of its own), so that sacct
# works: submitit (hydra/launcher=submitit_slurm) learns a job's end from sacct alone.
#
# Usage: scripts/slurm/start.sh STATE_DIR     (then: export SLURM_CONF=STATE_DIR/slurm.conf)
#        scripts/slurm/stop.sh STATE_DIR
# Two nodes, node1 and node2, each a slurmd on this host (NodeHostname=localhost, its own Port;
# Debian's 22.05 slurmd runs several per host) with this host's CPUs. Jobs' history: sacct, and STATE_DIR/jobcomp.txt (jobcomp/filetxt).
# Env: SLURM_PORT_BASE (default 16817: slurmctld on it, node1's slurmd on it + 1, node2's + 2,
# slurmdbd + 3, MariaDB + 4).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 1
fi
# the daemons are in sbin, which a user's PATH (Debian's, env -i's) often lacks
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
for tool in munged mungekey slurmctld slurmd slurmdbd sinfo sacctmgr mariadbd mariadb-install-db; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "error: $tool not found; install it with: apt-get install -y slurm-wlm slurmdbd munge mariadb-server" >&2; exit 1; }
done
mkdir -p "$1"
state=$(cd "$1" && pwd)
[[ -e $state/slurm.conf ]] && {
  echo "error: $state already holds a cluster (slurm.conf); stop it with scripts/slurm/stop.sh $state or use an empty folder" >&2
  exit 1; }
# slurm.conf and MariaDB's install script split a path at its spaces (a checkout in "My Work"
# failed so): the daemons reach a folder whose path holds other than [A-Za-z0-9_./-] through a
# link of a plain path, which stop.sh removes
if [[ $state =~ [^A-Za-z0-9_./-] ]]; then
  link=$(mktemp -d /tmp/aorta-slurm.XXXXXX)/state
  ln -s "$state" "$link"
  echo "$link" > "$state/link"
  state=$link
fi
port=${SLURM_PORT_BASE:-16817}
cpus=$(nproc)
mkdir -p "$state"/{munge,ctld,spool,log,db}
chmod 700 "$state/munge"

# munge: its own key and socket (slurm finds the socket through AuthInfo)
mungekey --create --keyfile="$state/munge/munge.key" --force 2>/dev/null \
  || dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$state/munge/munge.key"
munged --force --key-file="$state/munge/munge.key" --socket="$state/munge/munge.socket" \
  --pid-file="$state/munge/munged.pid" --log-file="$state/log/munged.log" \
  --seed-file="$state/munge/munged.seed"

# MariaDB for slurmdbd (--no-defaults: nothing from /etc/mysql): root over its own socket,
# slurmdbd over TCP on 127.0.0.1
mariadb-install-db --no-defaults --user=root --datadir="$state/db" --auth-root-authentication-method=normal \
  >"$state/log/mariadb-install.log" 2>&1 || {
  echo "error: mariadb-install-db failed; see $state/log/mariadb-install.log" >&2; exit 1; }
mariadbd --no-defaults --user=root --datadir="$state/db" --socket="$state/db.sock" --port=$((port + 4)) \
  --bind-address=127.0.0.1 --pid-file="$state/mariadb.pid" --log-error="$state/log/mariadb.log" \
  >/dev/null 2>&1 &
for _ in $(seq 60); do
  mariadb --no-defaults --socket="$state/db.sock" -uroot -e "select 1" >/dev/null 2>&1 && break
  sleep 0.5
done
mariadb --no-defaults --socket="$state/db.sock" -uroot -e "
  CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'aorta';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || {
  echo "error: MariaDB did not start; see $state/log/mariadb.log" >&2; exit 1; }

cat > "$state/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$state/munge/munge.socket
DbdHost=localhost
DbdPort=$((port + 3))
SlurmUser=root
PidFile=$state/slurmdbd.pid
LogFile=$state/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((port + 4))
StorageUser=slurm
StoragePass=aorta
StorageLoc=slurm_acct_db
CONF
chmod 600 "$state/slurmdbd.conf"
SLURM_CONF=$state/slurm.conf slurmdbd  # reads slurmdbd.conf beside SLURM_CONF
for _ in $(seq 60); do
  [[ -s $state/slurmdbd.pid ]] && grep -q "slurmdbd version .* started" "$state/log/slurmdbd.log" \
    2>/dev/null && break
  sleep 0.5
done

cat > "$state/slurm.conf" <<CONF
ClusterName=aorta
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$((port + 3))
AccountingStoragePass=$state/munge/munge.socket
JobCompType=jobcomp/filetxt
JobCompLoc=$state/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
MpiDefault=none
MailProg=/bin/true
NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=$cpus
NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 2)) CPUs=$cpus
PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF

export SLURM_CONF=$state/slurm.conf
sacctmgr -i add cluster aorta >/dev/null
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N node1
slurmd -f "$SLURM_CONF" -N node2
for _ in $(seq 60); do
  if [[ $(sinfo -h -N -o '%t' 2>/dev/null | sort -u) == idle ]]; then
    echo "slurm up: export SLURM_CONF=$SLURM_CONF"
    sinfo
    exit 0
  fi
  sleep 0.5
done
echo "error: the nodes are not idle after 30 s (sinfo: $(sinfo -h -N -o '%N %t %E' 2>&1)); see $state/log/" >&2
exit 1
