#!/usr/bin/env bash
# make bench: benchmarks with results under docs/benchmarks/ (JSON + Markdown).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/benchmarks
# The site manager at 100,000 hosts in 2,000 pools on 50 boot servers (issue 18), on a
# multi-provider slapd pair: load, validate, compile, evaluate, boot scripts at >= 5,000
# req/s, memory per replica, write-to-serve time across replicas. About 10 minutes.
go run ./test/bench/sitebench -bin bin/overtime -out docs/benchmarks
# The web UI at 10,000 hosts: overview, a later page, a search and a pool page, 200
# requests each after a warm-up; server time p50/p99 and bytes per page. About a minute.
go run ./test/bench/uibench -out docs/benchmarks
# Micro-benchmarks of the hot paths, for benchstat comparisons between commits.
go test -run='^$' -bench=. -benchmem -count=5 ./sitemgmt/schedule ./sitemgmt/render | tee docs/benchmarks/micro.txt
# Boot storm: N simulated PXE clients against the real dnsmasq and `overtime serve`
# (needs root: network namespaces). Rooms of 50 to 1,000 PCs switched on at once, each
# with the boot server's storm tuning (boot/storm: its sysctls, which the benchmark sets
# host-wide for the run and puts back; the rendered tftp-max/dhcp-lease-max; dnsmasq's
# open-file limit, priority and log pipe) and with
# the kernel's and dnsmasq's defaults, alternating, 3 repetitions (issue 18: 1,000 served
# within 30 s); then HTTP vs TFTP and the variations. About 20 minutes (the -defaults runs
# of 500 and 1000 last about 70 s each: their clients give up after 64 s); 25 on busy cores.
go run ./test/bench/bootstorm -overtime bin/overtime -n 50,200,500,1000 -reps 3 -tuning both -out docs/benchmarks
# A room of 200 PCs switching mode at one boundary (issue 15): all at once vs the reboot
# spread (power-ons uniform over 2 min), each PC also fetching its boot script from
# `overtime serve`; the two alternate, 6 repetitions each (needs root). About 13 minutes.
go run ./test/bench/bootstorm -overtime bin/overtime -switch-n 200 -switch-spread 2m -switch-reps 6 -out docs/benchmarks
# Real PXE boots of QEMU VMs through the whole chain, power-on to root mounted.
go test -count=1 -timeout 60m -run '^$' -bench PXEBoot -benchtime 1x ./test/bench/pxeboot -args -out "$PWD/docs/benchmarks"
# The node agent: key press -> guest throttled, 200 presses per backend (container, QEMU
# via libvirt), and the agent's idle CPU and memory. About 10 minutes.
go test -count=1 -timeout 60m -run '^$' -bench AgentReaction -benchtime 1x ./test/bench/agentreact -args -out "$PWD/docs/benchmarks"
# Interference (issue 16, docs/interference.md): desktop workloads × guest workloads ×
# isolation policies (process backend; a few container and QEMU cells), desktop alone /
# guest alone / both, shuffled per round, 5 rounds; throughput desktops are measured in
# paired frozen/running segments of one process; slowdown and harvest medians with 95%
# intervals, wake-up latency, the estimator's inputs per run; then the figures. Needs root
# and the cores to itself (run nothing else); the QEMU cells boot the kernel of the test
# image the PXE benchmark above built (without one they are left out, and the report says
# so). About 26 minutes (the command prints its estimate before it starts). It runs
# before the harvest simulation, which replays its measured slowdown curves.
bin/overtime-agent bench interference --cells standard --out docs/benchmarks/interference
go run ./test/bench/interferenceplot -in docs/benchmarks/interference/interference.json
# The slowdown estimator against the matrix (estimator.md): the report interval fitted on
# the even rounds, the error on the odd ones; the model search is reported, not shipped.
go run ./test/bench/interferencefit -in docs/benchmarks/interference/interference.json -search=false
# Harvest simulation: a synthetic week of a 200-host pool replayed through the real policy
# engine, the adaptive controller (stepped every 250 ms, as the agent does) and three
# reference policies, with the matrix's measured slowdown curves; one week (seed 1) and
# the sensitivity runs: about 15 minutes.
go test -count=1 -timeout 90m -run '^$' -bench Harvest -benchtime 1x ./test/bench/harvest -args -out "$PWD/docs/benchmarks" -seeds 1 -interference "$PWD/docs/benchmarks/interference/interference.json"
# Reservations and warning signals (issue 15): the harvest week with course-VM slots and
# short-notice changes, one Slurm queue over the pool, overtime-default without and with
# reservations (and signals), same week and job stream; seeds 1-5 (about 15 s).
go test -count=1 -run '^$' -bench Reservations -benchtime 1x ./test/bench/harvest -args -out "$PWD/docs/benchmarks"
# Owner activity -> Slurm node features/weight: real slurmctld, agent, container guest
# with slurmd -Z and overtime-slurm-sync; 100 changes each way. About 5 minutes.
go test -count=1 -timeout 30m -run '^$' -bench SlurmPropagation -benchtime 1x ./test/bench/slurmsync -args -out "$PWD/docs/benchmarks"
# The same at 5,000 nodes (issue 18): real slurmctld with 5,000 node records (no slurmd),
# overtime serve, overtime-slurm-sync; 5,000 simulated agents, 10% changing owner state
# per minute; batching and --no-batch in alternating 60 s segments, 5 each. About 15 minutes.
go test -count=1 -timeout 60m -run '^$' -bench SlurmScale -benchtime 1x ./test/bench/slurmscale -args -out "$PWD/docs/benchmarks"
# MPI jobs (test/bench/mpibench): Open MPI ping-pong latency (8 B) and streaming bandwidth
# (1 MiB) between two container guests (srun --mpi=pmix, TCP over the lab bridge) and within
# one guest (shared memory), against the same two ranks on the host (TCP over loopback,
# shared memory) and the host's ranks in the guests' idle class; shuffled rounds, ratios
# from the same run (needs root). About 8 minutes (15 at most: -budget).
go test -count=1 -timeout 40m -run '^$' -bench MPI -benchtime 1x ./test/bench/mpibench -args -out "$PWD/docs/benchmarks"
# Runtime state in the directory: heartbeat writes/s into a single slapd and a
# multi-provider pair side by side, and replica-to-replica propagation. About a minute.
go test -count=1 -timeout 20m -run '^$' -bench State -benchtime 1x ./test/bench/statebench -args -out "$PWD/docs/benchmarks"
# A whole site's agents (issue 18): 10,000 hosts heartbeating every 30 s into two real
# `overtime serve` replicas, each on its own provider of a multi-provider slapd pair, with
# 0, 1, 4 and 16 Slurm feed clients per replica in turn: heartbeat POST and owner change
# to feed latency, CPU, memory and directory writes per replica and slapd. Runs after
# statebench (its reading compares with the pair's write rate). About 5 minutes.
go run ./test/bench/agentscale -out docs/benchmarks
# TLS on the same heartbeat path, 10,000 agents: a plain-HTTP and an HTTPS replica (throwaway
# ECDSA P-256 CA; the agents pin it with the node agent's own client), all agents on one arm
# at a time: plain, TLS keep-alive (HTTP/2, one connection per agent), a new TLS connection
# per heartbeat with a full handshake (-reconnect) and resuming a session (-resume); 30 s
# windows, arms rotated over 5 rounds. Server CPU per heartbeat, POST latency, ratios to
# plain within each round (agentscale-tls.md). About 14 minutes.
go run ./test/bench/agentscale -tls -reconnect -resume -out docs/benchmarks
# Publishing a 2 GiB image version to three boot servers (site manager + three image
# syncs on this machine): wall time and bytes moved, 3 runs. About 3 minutes, 9 GiB of disk.
go test -count=1 -timeout 60m -run '^$' -bench Publish -benchtime 1x ./test/bench/publishbench -args -out "$PWD/docs/benchmarks"
# The seat (issue 28): the seed's interference experiment in the booted graphical session:
# bench-seat (the desktop with a root console) PXE-booted in QEMU, a student in Xfce, the
# guest's Slurm job on both vCPUs; alone / no isolation / idle class / adaptive in shuffled
# rounds; an X11 frame loop at 60 Hz, a warm find / and glxgears; then the course VM's
# session. Needs root and the cores to itself. About 45 minutes.
go test -count=1 -timeout 120m -run '^$' -bench Seat -benchtime 1x ./test -args -seat-out "$PWD/docs/benchmarks"
# Images (issue 14): size and build time per recipe (cold, base cached, up to date; cold
# builds download from the Debian mirror), and the desktop's boot in QEMU from squashfs on
# NFS against the same tree as a plain NFS directory, with ls -lR /usr and a large
# program's start on each, interleaved. Needs root. About 40 minutes (48 with other work on the cores).
go test -count=1 -timeout 90m -run '^$' -bench Images -benchtime 1x ./test/bench/images -args -out "$PWD/docs/benchmarks"
