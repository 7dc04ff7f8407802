--[[
job_submit.lua for Overtime (Slurm 22.05 job_submit/lua, Lua 5.1 compatible).

Install next to slurm.conf on the controller (/etc/slurm/job_submit.lua,
`make install-lua`) and set JobSubmitPlugins=lua in slurm.conf.

The SPANK plugin spank_overtime.so adds the job option
--desktop=allow|avoid|only-dedicated.  A SPANK option cannot pick nodes
itself (node selection happens in slurmctld, before any plugin code runs on
a node), but sbatch/salloc/srun forward it to the controller in the job's
spank environment as _SLURM_SPANK_OPTION_overtime_desktop=VALUE.  This script
turns it into a node constraint, using the features the Overtime sync daemon
maintains on nodes (the Feature constants in vocab/wire/slurm.go;
vocab/wire/fixture_test.go checks that this table names only those):

  allow           no change: any node (the default)
  avoid           dedicated|desk-empty: cluster-mode hosts, and desktops
                  nobody is using
  only-dedicated  dedicated: hosts in cluster mode only

If the job already has a constraint, ours is ANDed to it.  Slurm 22.05 only
allows AND inside parentheses in feature expressions and evaluates & and |
without grouping, so "(a|b)&(c|d)" cannot be written: when either side
contains '|', the job is rejected with a message rather than silently given
a constraint that means something else.
--]]

local OPTION = "_SLURM_SPANK_OPTION_overtime_desktop"

-- false: valid value, no constraint.
local CONSTRAINT = {
	["allow"] = false,
	["avoid"] = "dedicated|desk-empty",
	["only-dedicated"] = "dedicated",
}

-- The --desktop value from the spank environment, or nil.
local function desktop_value(job_desc)
	-- Each read of a job_desc field builds a new table: read it once.
	local env = job_desc.spank_job_env
	if env == nil then
		return nil
	end
	local prefix = OPTION .. "="
	local value = nil
	-- pairs, not ipairs: Slurm fills this table from index 0.
	for _, entry in pairs(env) do
		if type(entry) == "string" and string.sub(entry, 1, #prefix) == prefix then
			value = string.sub(entry, #prefix + 1)
		end
	end
	return value
end

-- existing AND ours, or nil and the reason it cannot be expressed.
local function combine(existing, ours)
	if existing == nil or existing == "" then
		return ours
	end
	if string.find(existing, "|", 1, true) or string.find(ours, "|", 1, true) then
		return nil, string.format("cannot combine the constraint \"%s\" with \"%s\" " ..
			"(Slurm 22.05 cannot group | expressions)", existing, ours)
	end
	return existing .. "&" .. ours
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local value = desktop_value(job_desc)
	if value == nil then
		return slurm.SUCCESS
	end

	local ours = CONSTRAINT[value]
	if ours == nil then
		slurm.log_user("--desktop: unknown value \"%s\": must be allow, avoid or only-dedicated", value)
		slurm.log_info("overtime: rejected job from uid %s: --desktop=%s", tostring(submit_uid), value)
		return slurm.ERROR
	end
	if ours == false then
		slurm.log_info("overtime: job from uid %s: --desktop=%s, constraint unchanged",
			tostring(submit_uid), value)
		return slurm.SUCCESS
	end

	local existing = job_desc.features
	local features, why = combine(existing, ours)
	if features == nil then
		slurm.log_user("--desktop=%s: %s; drop --desktop and write the whole expression " ..
			"with --constraint instead", value, why)
		slurm.log_info("overtime: rejected job from uid %s: --desktop=%s with constraint %s",
			tostring(submit_uid), value, existing)
		return slurm.ERROR
	end
	job_desc.features = features
	slurm.log_info("overtime: job from uid %s: --desktop=%s, constraint %s -> %s",
		tostring(submit_uid), value, (existing ~= nil and existing ~= "") and existing or "(none)",
		features)
	return slurm.SUCCESS
end

-- The spank environment cannot change after submission; a constraint changed
-- with scontrol update is the administrator's or user's explicit choice.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

return slurm.SUCCESS
