#!/bin/sh
# End-to-end check against real Slurm 22.05 daemons (make check-e2e; not part
# of make check).  Needs root, slurmctld, slurmd, python3, and job_submit/lua
# (Debian: slurmctld, slurmd, lua5.1).
#
# Starts a private one-node cluster in a temporary directory (auth/none, its
# own ports, SLURM_CONF pointing there: nothing in /etc is touched) and a fake
# node agent, then checks: --desktop in sbatch's help and validation, the
# constraints job_submit.lua sets, nice 19 + SCHED_IDLE in batch and step
# tasks, the prolog/epilog agent calls and their log lines, a job surviving an
# unreachable agent, and a bad plugstack.conf argument stopping sbatch.
# Only the processes it started are stopped at the end.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PLUGIN=$HERE/spank_overtime.so
CTLD_PORT=${CTLD_PORT:-16817}
SLURMD_PORT=${SLURMD_PORT:-16818}
AGENT_PORT=${AGENT_PORT:-19101}
D=$(mktemp -d /tmp/overtime-spank-e2e.XXXXXX)
PIDS=""
FAILS=0

cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	if [ "$FAILS" -eq 0 ]; then rm -rf "$D"; else echo "logs kept in $D" >&2; fi
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	n=$(($1 * 4)); shift
	while [ "$n" -gt 0 ]; do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.25; n=$((n - 1))
	done
	return 1
}

[ -x "$PLUGIN" ] || { echo "build $PLUGIN first (make)" >&2; exit 1; }
mkdir -p "$D/state" "$D/spool"
HOST=$(hostname -s)
cat > "$D/slurm.conf" <<CONF
ClusterName=ote2e
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/ctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/ctld.log
SlurmdLogFile=$D/slurmd.log
SlurmdDebug=verbose
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobSubmitPlugins=lua
PlugStackConfig=$D/plugstack.conf
NodeName=ote2e NodeAddr=127.0.0.1 CPUs=1 Features=dedicated,desk-empty,gpu State=UNKNOWN
PartitionName=p Nodes=ote2e Default=YES State=UP
CONF
echo "required $PLUGIN agent=http://127.0.0.1:$AGENT_PORT tasks=idle timeout=2000" > "$D/plugstack.conf"
cp "$HERE/job_submit.lua" "$D/job_submit.lua"
cat > "$D/agent.py" <<'PY'
import http.server, json, re, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        m = re.match(r"^/v1/jobs/(\d+)/(start|end)$", self.path)
        print("AGENT", self.path, flush=True)
        if not m:
            code, body = 404, {"error": "bad path"}
        elif m.group(2) == "start":
            code, body = 200, {"job": m.group(1), "host": "pc1", "mode": "desktop"}
        else:
            code, body = 200, {"job": m.group(1), "host": "pc1", "seconds": 12.5,
                               "throttledSeconds": 3.1, "actions": {"freeze": 1},
                               "summary": "e2e report of job " + m.group(1)}
        b = json.dumps(body).encode() + b"\n"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY

export SLURM_CONF="$D/slurm.conf"
python3 "$D/agent.py" "$AGENT_PORT" > "$D/agent.log" 2>&1 &
AGENT_PID=$!
PIDS="$PIDS $AGENT_PID"
slurmctld -D -i > "$D/ctld.out" 2>&1 &
PIDS="$PIDS $!"
wait_for 20 scontrol ping || { fail "slurmctld did not start"; exit 1; }
slurmd -D -N ote2e > "$D/slurmd.out" 2>&1 &
PIDS="$PIDS $!"
wait_for 30 sh -c 'sinfo -h -o %T | grep -q idle' || { fail "node did not come up"; exit 1; }

# Option and validation (allocator context).
if sbatch --help 2>&1 | grep -q -- '--desktop=allow|avoid|only-dedicated'; then
	ok "sbatch --help lists --desktop"
else fail "--desktop missing from sbatch --help"; fi
if out=$(sbatch --desktop=bogus --wrap true 2>&1); then
	fail "sbatch --desktop=bogus succeeded"
else
	echo "$out" | grep -q 'must be allow, avoid or only-dedicated' &&
		ok "--desktop=bogus rejected by the plugin" || fail "bogus: $out"
fi

# job_submit.lua constraints.
features() { scontrol show job "$1" | sed -n 's/.*Features=\([^ ]*\).*/\1/p'; }
check_features() { # args: want, sbatch options...
	want=$1; shift
	if ! j=$(sbatch --parsable --hold "$@" --wrap true 2>&1); then
		fail "sbatch $*: $j"; return
	fi
	got=$(features "$j")
	[ "$got" = "$want" ] && ok "$* -> Features=$got" || fail "$*: Features=$got, want $want"
	scancel "$j"
}
check_features "dedicated|desk-empty" --desktop=avoid
check_features "dedicated" --desktop=only-dedicated
check_features "gpu&dedicated" --desktop=only-dedicated -C gpu
check_features "(null)" --desktop=allow
if out=$(sbatch --hold --desktop=avoid -C gpu --wrap true 2>&1); then
	fail "--desktop=avoid -C gpu accepted"
else
	echo "$out" | grep -q 'cannot combine' && ok "--desktop=avoid -C gpu rejected" || fail "avoid+gpu: $out"
fi

# A real job: task priority in batch and step, prolog/epilog agent calls.
cat > "$D/job.sh" <<'JOB'
#!/bin/sh
awk '{print "batch nice=" $19}' /proc/self/stat
grep -o 'policy *: *[0-9]*' /proc/self/sched 2>/dev/null | sed 's/^/batch /' || true
srun --desktop=avoid awk '{print "step nice=" $19}' /proc/self/stat
JOB
run_job() {
	j=$(sbatch --parsable -o "$D/job-%j.out" "$D/job.sh")
	wait_for 30 sh -c "scontrol show job $j | grep -q 'JobState=COMPLETED'" ||
		fail "job $j did not complete: $(scontrol show job "$j" | grep -o 'JobState=[A-Z_]*')"
	# The epilog runs after completion: give it a moment.
	wait_for 10 grep -q "overtime: job $j: POST .*/end failed\|overtime: job $j report" "$D/slurmd.log" || true
	echo "$j"
}
j=$(run_job)
grep -q '^batch nice=19$' "$D/job-$j.out" && grep -q '^step nice=19$' "$D/job-$j.out" &&
	ok "batch and step tasks at nice 19" || fail "nice: $(cat "$D/job-$j.out")"
if grep -q '^batch policy' "$D/job-$j.out"; then
	grep -q '^batch policy *: *5$' "$D/job-$j.out" && ok "SCHED_IDLE" || fail "policy: $(cat "$D/job-$j.out")"
fi
grep -q "overtime: job $j started on host pc1 (mode desktop)" "$D/slurmd.log" &&
	ok "prolog logged the agent's start answer" || fail "no start line for job $j"
grep -q "overtime: job $j report: e2e report of job $j" "$D/slurmd.log" &&
	ok "epilog logged the report" || fail "no report line for job $j"
grep -q "AGENT /v1/jobs/$j/start" "$D/agent.log" && grep -q "AGENT /v1/jobs/$j/end" "$D/agent.log" &&
	ok "agent got start and end" || fail "agent log: $(cat "$D/agent.log")"

# Agent down: the job still completes, the log says why the report is missing.
kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
j=$(run_job)
grep -q "overtime: job $j: POST .*/start failed: .*the job runs, but its Overtime report will be missing" "$D/slurmd.log" &&
	grep -q "overtime: job $j: POST .*/end failed: .*no Overtime report for this job" "$D/slurmd.log" &&
	ok "job $j completed with the agent down, errors logged" || fail "agent-down log lines for job $j"

# A typo in plugstack.conf stops sbatch (the client reads plugstack.conf).
echo "required $PLUGIN agent=http://127.0.0.1:$AGENT_PORT task=idle" > "$D/plugstack.conf"
if out=$(sbatch --wrap true 2>&1); then
	fail "sbatch ran with a bad plugin argument: $out"
else
	echo "$out" | grep -q 'unknown plugin argument "task=idle"' &&
		ok "bad plugin argument stops sbatch" || fail "bad arg: $out"
fi

if [ "$FAILS" -ne 0 ]; then echo "test_e2e: $FAILS failure(s)" >&2; exit 1; fi
echo "test_e2e: ok"
