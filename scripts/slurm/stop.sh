#!/usr/bin/env bash
# Stop what scripts/slurm/start.sh STATE_DIR started: slurmd, slurmctld, slurmdbd, MariaDB, munged (by their pid
# files in STATE_DIR), waiting until each has gone. Safe to run twice or on a half-started folder.
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: scripts/slurm/stop.sh STATE_DIR" >&2
  exit 1
fi
state=$1
for pidfile in "$state"/slurmd-*.pid "$state/slurmctld.pid" "$state/slurmdbd.pid" \
    "$state/mariadb.pid" "$state/munge/munged.pid"; do
  [[ -s $pidfile ]] || continue
  pid=$(<"$pidfile")
  kill -TERM "$pid" 2>/dev/null || continue
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
done
# the link start.sh made for a path with spaces, and its folder
if [[ -s $state/link ]]; then
  link=$(<"$state/link")
  [[ $link == /tmp/aorta-slurm.*/state && -L $link ]] && rm -f "$link" && rmdir "$(dirname "$link")"
  rm -f "$state/link"
fi
exit 0
