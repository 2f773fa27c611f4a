#!/bin/sh
# The one-node SLURM that tests/inference/test_slurm.py starts (tests/slurm_cluster.py): Debian's
# slurm-wlm (slurmctld, slurmd, sbatch, squeue, scontrol, sinfo) and munge. Installed with apt-get
# when they are missing and this is root with apt-get; otherwise, or with --check-only (an
# air-gapped install: apt-get needs the network), a note says what to install. The tests start
# and stop their own daemons (own config, ports and sockets): nothing here starts a service.
set -eu
PATH="$PATH:/usr/sbin:/sbin"
missing=""
for program in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
  command -v "$program" >/dev/null 2>&1 || missing="$missing $program"
done
if [ -z "$missing" ]; then
  exit 0
fi
if [ "${1:-}" != "--check-only" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge
else
  echo "note: no local SLURM ($missing missing): the SLURM tests fail under 'make test'." >&2
  echo "      Install it (Debian, as root: apt-get install slurm-wlm munge)." >&2
fi
