/*
 * The job user's identity in the compute guest.
 *
 * University users' jobs run as themselves (uids like 1234567) in a guest
 * that is an OS-level container in a user namespace, so two things must hold
 * before a job's tasks start, and this file provides both:
 *
 *   - every id the step takes (uid, primary gid, supplementary gids) is
 *     mapped in the guest's user namespace.  An unmapped one makes
 *     slurmstepd's setgroups/setresuid fail with a bare EINVAL; checked in
 *     slurm_spank_init (S_CTX_REMOTE) instead, with the ranges the guest
 *     does map in the message.
 *   - the user has a name in the guest.  Debian 12 ships no nss_slurm, and
 *     the guest's image knows none of the site's users, so the prolog adds
 *     an /etc/passwd entry (and a user-private group) the way enroot's hooks
 *     do.  Without it the job still runs by uid, but `id`, `whoami`, ssh,
 *     Python's getpass and friends fail or print numbers.
 *
 * No Slurm dependency: the hooks in spank_overtime.c fetch the ids and log,
 * this file parses and writes, so the tests link it alone.  The directory of
 * passwd and group is a parameter ("/etc" in the plugin) so that the tests
 * work on a copy.
 */
#ifndef OVERTIME_IDENTITY_H
#define OVERTIME_IDENTITY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- user namespace maps (/proc/self/uid_map, gid_map) ---- */

/* The kernel's limit on extents per map (since Linux 4.15). */
#define OT_ID_MAP_MAX 340

/* One line of a map: ids inside..inside+count-1 are mapped. */
struct ot_id_extent {
	uint32_t inside;
	uint32_t outside;
	uint32_t count;
};

struct ot_id_map {
	size_t n;
	struct ot_id_extent e[OT_ID_MAP_MAX];
};

/*
 * Parse a map file's text (len bytes, need not be NUL-terminated): lines of
 * three unsigned decimals "inside outside count", separated and padded by
 * blanks, as the kernel prints them.  Refused, as the kernel refuses to write
 * them: a missing or extra field, a sign, a value over 2^32-1, count 0, and
 * inside+count or outside+count over 2^32-1 (id 4294967295, (uid_t)-1, is
 * never mapped).  An empty text is a valid, empty map (a namespace whose map
 * was never written maps nothing).  Returns 0, or -1 with the reason in err.
 */
int ot_id_map_parse(const char *text, size_t len, struct ot_id_map *map,
		    char *err, size_t errlen);

/* 1 if id is mapped (inside the map's ranges), 0 if not. */
int ot_id_map_contains(const struct ot_id_map *map, uint32_t id);

/*
 * The map's inside ranges for a message: "0-65535, 1000000-1999999" (a
 * single id as "5", an empty map as "none"), in the map's order, truncated
 * with "..." to fit buf.
 */
void ot_id_map_format(const struct ot_id_map *map, char *buf, size_t buflen);

enum ot_ids_check {
	OT_IDS_MAPPED = 0,     /* every id is mapped */
	OT_IDS_UNMAPPED = -1,  /* one is not: the step must fail; err says which */
	OT_IDS_UNCHECKED = -2, /* a map could not be read or parsed; err says why */
};

/*
 * Check uid, gid and gids[0..ngids-1] against the maps' texts (pure: the
 * tests give the texts).  The first unmapped id is reported in err as
 *   the job's uid 99 is outside this guest's user ids (0-65535, ...): the
 *   site's guest definition (jobUsers) must cover it
 * ("gid", "supplementary gid"; "group ids" for both).
 */
enum ot_ids_check ot_check_ids_in_maps(const char *uid_map, size_t uid_map_len,
				       const char *gid_map, size_t gid_map_len,
				       uid_t uid, gid_t gid, const gid_t *gids,
				       int ngids, char *err, size_t errlen);

/* The same against /proc/self/uid_map and /proc/self/gid_map. */
enum ot_ids_check ot_check_ids(uid_t uid, gid_t gid, const gid_t *gids,
			       int ngids, char *err, size_t errlen);

/* ---- the job user's passwd and group entries ---- */

/* home= default: /home/<user name>. */
#define OT_HOME_DEFAULT "/home/%u"
#define OT_USER_NAME_MAX 64

/*
 * Check a home= pattern: an absolute path, no ':' (the passwd field
 * separator), no control character (a newline would start a forged
 * passwd line), '%' only in the escapes %u (the user name) and %%, and at
 * most 255 characters once expanded for the longest name (64 characters).
 * Returns 0, or -1 with the reason in err.  Used at config load, so a bad
 * pattern stops the plugin from loading.
 */
int ot_home_pattern_check(const char *pattern, char *err, size_t errlen);

/*
 * Expand a checked pattern for name into buf.  Returns 0, or -1 if the
 * pattern is invalid or the result does not fit.
 */
int ot_home_expand(const char *pattern, const char *name, char *buf,
		   size_t buflen);

/*
 * 1 if name may go into passwd: 1 to 64 characters of [A-Za-z0-9_.@-],
 * starting and ending with a letter, digit or '_' (so no ".", "..", "-x"
 * options, "user." of chown's old USER.GROUP syntax, or trailing '@').
 */
int ot_user_name_valid(const char *name);

/*
 * Parse a uid or gid as Slurm prints it (%u): decimal digits only, no sign,
 * blanks or leading zeros, at most 4294967294 ((uid_t)-1 is "no id").
 * Returns 0, or -1.
 */
int ot_parse_id(const char *s, uint32_t *out);

struct ot_job_user {
	char name[OT_USER_NAME_MAX + 1];
	uint32_t uid;
	uint32_t gid;
};

/*
 * Read the job user from the prolog's environment: SLURM_JOB_USER,
 * SLURM_JOB_UID, SLURM_JOB_GID, which slurmd sets from the job credential
 * (plain getenv(3): the prolog is its own process, run by slurmd with that
 * environment).  Returns 0, or -1 with the reason in err (missing, bad name,
 * unparsable id).
 */
int ot_job_user_from_env(struct ot_job_user *u, char *err, size_t errlen);

enum ot_ensure {
	OT_ENSURE_PRESENT = 0, /* nothing to do (msg may say why) */
	OT_ENSURE_ADDED = 1,   /* an entry was written; msg says which */
	OT_ENSURE_ERROR = -1,  /* msg says what was not done, and why */
};

/*
 * Give u a name in etc_dir/passwd ("/etc" in the plugin):
 *   - an entry with u->uid exists: nothing to do, whatever its name;
 *   - an entry named u->name has another uid: error, nothing written (never
 *     a second entry for a name);
 *   - otherwise append NAME:x:UID:GID:Overtime job user:HOME:/bin/sh, HOME
 *     from home_pattern.
 * Then, when gid == uid (a user-private group) and the uid's entry carries
 * u->name, append NAME:x:GID: to etc_dir/group unless a group has that gid
 * (a group named NAME with another gid is an error).  A gid other than the
 * uid is left alone: the prolog has no group name for it.
 *
 * Files are parsed here, not through NSS, under the shadow suite's lock
 * (lckpwdf(); for another etc_dir, the same fcntl lock on etc_dir/.pwd.lock),
 * and replaced atomically: a temporary file in etc_dir with the old content
 * and the new line, the old mode and owner, fsync, rename.
 */
enum ot_ensure ot_ensure_job_user(const char *etc_dir,
				  const struct ot_job_user *u,
				  const char *home_pattern, char *msg,
				  size_t msglen);

#endif
