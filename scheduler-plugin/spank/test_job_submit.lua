-- Unit test of job_submit.lua with a stub of Slurm's `slurm` table.
-- Run: lua5.1 test_job_submit.lua (make check does).

local logs = { user = {}, info = {} }

slurm = {
	SUCCESS = 0,
	ERROR = -1,
	-- Slurm defines these as slurm.log(level, string.format(fmt, ...)).
	log_user = function(fmt, ...) table.insert(logs.user, string.format(fmt, ...)) end,
	log_info = function(fmt, ...) table.insert(logs.info, string.format(fmt, ...)) end,
}

local dir = string.match(arg and arg[0] or "", "^(.*)/") or "."
dofile(dir .. "/job_submit.lua")

local failures = 0
local function check(cond, what)
	if not cond then
		failures = failures + 1
		io.stderr:write("FAIL: " .. what .. "\n")
	end
end

-- Build a job_desc like Slurm's: spank_job_env indexed from 0, or nil.
local function job(desktop, features, extra_env)
	local env = nil
	if desktop ~= nil or extra_env ~= nil then
		env = {}
		local i = 0
		for _, e in ipairs(extra_env or {}) do
			env[i] = e
			i = i + 1
		end
		if desktop ~= nil then
			env[i] = "_SLURM_SPANK_OPTION_overtime_desktop=" .. desktop
			i = i + 1
		end
	end
	local n = 0
	for _ in pairs(env or {}) do n = n + 1 end
	return { spank_job_env = env, spank_job_env_size = n, features = features }
end

local function run(name, desktop, features, want_rc, want_features, want_user_msg, extra_env)
	logs.user, logs.info = {}, {}
	local j = job(desktop, features, extra_env)
	local rc = slurm_job_submit(j, {}, 1000)
	check(rc == want_rc, name .. ": rc " .. tostring(rc) .. ", want " .. tostring(want_rc))
	check(j.features == want_features, name .. ": features " .. tostring(j.features) ..
		", want " .. tostring(want_features))
	if want_user_msg then
		local msg = logs.user[1] or ""
		check(string.find(msg, want_user_msg, 1, true) ~= nil,
			name .. ": user message \"" .. msg .. "\" lacks \"" .. want_user_msg .. "\"")
	else
		check(#logs.user == 0, name .. ": unexpected user message " .. tostring(logs.user[1]))
	end
	return j
end

local S, E = slurm.SUCCESS, slurm.ERROR

run("no spank env", nil, nil, S, nil)
run("no spank env, features kept", nil, "gpu", S, "gpu")
run("other plugin options only", nil, "gpu", S, "gpu", nil,
	{ "_SLURM_SPANK_OPTION_pyxis_container_image=ubuntu" })
run("similar name not matched", nil, nil, S, nil, nil,
	{ "_SLURM_SPANK_OPTION_overtime_desktops=avoid", "X_SLURM_SPANK_OPTION_overtime_desktop=avoid" })
run("allow", "allow", nil, S, nil)
run("allow keeps features", "allow", "a|b", S, "a|b")
run("avoid", "avoid", nil, S, "dedicated|desk-empty")
run("avoid, empty features", "avoid", "", S, "dedicated|desk-empty")
run("only-dedicated", "only-dedicated", nil, S, "dedicated")
run("only-dedicated with features", "only-dedicated", "gpu&bigmem", S, "gpu&bigmem&dedicated")
run("only-dedicated among other options", "only-dedicated", nil, S, "dedicated", nil,
	{ "_SLURM_SPANK_OPTION_pyxis_container_image=ubuntu", "FOO=bar" })
run("avoid with features", "avoid", "gpu", E, "gpu", "cannot combine")
run("only-dedicated with OR features", "only-dedicated", "a|b", E, "a|b", "cannot combine")
run("unknown value", "sometimes", nil, E, nil, "--desktop: unknown value \"sometimes\"")
run("empty value", "", nil, E, nil, "--desktop: unknown value")
run("value with =", "avoid=1", nil, E, nil, "--desktop: unknown value")

-- A rejected job logs for the admin too; an accepted one says what changed.
logs.info = {}
slurm_job_submit(job("avoid", nil), {}, 1000)
check(string.find(logs.info[1] or "", "--desktop=avoid, constraint (none) -> dedicated|desk-empty", 1, true) ~= nil,
	"info log: " .. tostring(logs.info[1]))

logs.info = {}
slurm_job_submit(job("only-dedicated", "gpu"), {}, 1000)
check(string.find(logs.info[1] or "", "constraint gpu -> gpu&dedicated", 1, true) ~= nil,
	"info log: " .. tostring(logs.info[1]))

check(slurm_job_modify({}, {}, {}, 0) == S, "slurm_job_modify returns SUCCESS")

if failures > 0 then
	io.stderr:write(string.format("test_job_submit: %d failure(s)\n", failures))
	os.exit(1)
end
print("test_job_submit: ok")
