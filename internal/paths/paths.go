// Package paths names the default locations of Overtime's files on the machines it runs
// on. Every default lives here once, so that the boot server, the site manager's render
// endpoints, the node agent, the CLI flags and the guest backends agree; command-line flags
// and options override them.
package paths

// Boot server.
const (
	// ImageExport is the published image tree (one directory per image version), exported
	// over NFS and HTTP; also the NFS root a boot server announces when its entry does not
	// name one (model.BootServer.NFSRoot).
	ImageExport = "/srv/overtime/images"
	// TFTPRoot receives the first-stage loaders dnsmasq serves.
	TFTPRoot = "/srv/overtime/tftp"
	// BootServerState keeps the last good configuration and the dnsmasq leases.
	BootServerState = "/var/lib/overtime/bootserver"
	// DnsmasqHosts is the dhcp-hostsfile a rendered dnsmasq configuration names when the
	// caller of the render endpoint does not give one.
	DnsmasqHosts = "/var/lib/overtime/dnsmasq/hosts"
	// KernelNFSExports is the exports file the boot server manages for the kernel NFS server.
	KernelNFSExports = "/etc/exports.d/overtime.exports"
)

// Node agent. Everything below /run is tmpfs: a pool PC keeps nothing across reboots.
const (
	// AgentToken is the host credential (overtime host credential HOST --out FILE).
	AgentToken = "/run/overtime/agent.token"
	// AgentState holds the cached configuration and the guests' state directories.
	AgentState = "/run/overtime/agent"
	// AgentImages is where the image export is mounted read-only.
	AgentImages = "/run/overtime/images"
	// GuestState is the VMware backend's state root (one directory per guest).
	GuestState = "/run/overtime/guest"
	// ContainerRun keeps the container backend's per-guest records and locks.
	ContainerRun = "/run/overtime/container"
	// CourseVMSpec is where the agent tells the desktop session's course-VM player which
	// VM to show (node-agent/coursevm); absent outside course-vm modes. World-readable.
	CourseVMSpec = "/run/overtime/course-vm.json"
	// ExamMarker exists while the PC is in an exam (the agent writes it; the desktop's
	// overtime-exam.path locks the session down).
	ExamMarker = "/run/overtime/exam"
	// ExamRuleset is the nftables ruleset the agent loads while the PC is in an exam
	// (node-agent/examfw), kept for `nft -f` and for an administrator to read.
	ExamRuleset = "/run/overtime/exam.nft"
	// AgentListen is the agent's HTTP address for /metrics and the guest's job calls.
	AgentListen = ":9101"
)
