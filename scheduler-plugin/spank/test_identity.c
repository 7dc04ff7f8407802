/*
 * Tests of identity.c: user namespace maps and the id check, home= patterns,
 * names and ids from the prolog's environment, and the passwd and group
 * entries, written into a throwaway directory standing in for /etc.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "identity.h"
#include "test_check.h"

/* ---- maps ---- */

static int parse(const char *text, struct ot_id_map *m, char *err, size_t errlen)
{
	err[0] = '\0';
	return ot_id_map_parse(text, strlen(text), m, err, errlen);
}

static void test_map_parse(void)
{
	static struct ot_id_map m;
	char err[256], buf[256];

	/* Outside any user namespace: everything but (uid_t)-1. */
	CHECK(parse("         0          0 4294967295\n", &m, err, sizeof(err)) == 0);
	CHECK(m.n == 1);
	CHECK(ot_id_map_contains(&m, 0));
	CHECK(ot_id_map_contains(&m, 1234567));
	CHECK(ot_id_map_contains(&m, 4294967294u));
	CHECK(!ot_id_map_contains(&m, 4294967295u));
	ot_id_map_format(&m, buf, sizeof(buf));
	CHECK_STR(buf, "0-4294967294");

	/* A guest: its own ids, then the site's job users; tabs, no final newline. */
	CHECK(parse("0 1000000000 65536\n  1000000\t2000000 1000000\n70000 5 1", &m, err,
		    sizeof(err)) == 0);
	CHECK(m.n == 3);
	CHECK(m.e[1].inside == 1000000 && m.e[1].outside == 2000000 &&
	      m.e[1].count == 1000000);
	ot_id_map_format(&m, buf, sizeof(buf));
	CHECK_STR(buf, "0-65535, 1000000-1999999, 70000");
	/* Boundaries: inside is in, inside+count is out. */
	CHECK(ot_id_map_contains(&m, 65535));
	CHECK(!ot_id_map_contains(&m, 65536));
	CHECK(!ot_id_map_contains(&m, 999999));
	CHECK(ot_id_map_contains(&m, 1000000));
	CHECK(ot_id_map_contains(&m, 1999999));
	CHECK(!ot_id_map_contains(&m, 2000000));
	CHECK(!ot_id_map_contains(&m, 69999));
	CHECK(ot_id_map_contains(&m, 70000));
	CHECK(!ot_id_map_contains(&m, 70001));

	/* The highest extents the kernel accepts. */
	CHECK(parse("4294967294 0 1\n", &m, err, sizeof(err)) == 0);
	CHECK(ot_id_map_contains(&m, 4294967294u));
	CHECK(!ot_id_map_contains(&m, 4294967295u));
	CHECK(!ot_id_map_contains(&m, 0));
	CHECK(parse("0 4294967294 1\n", &m, err, sizeof(err)) == 0);

	/* An unwritten map maps nothing. */
	CHECK(parse("", &m, err, sizeof(err)) == 0);
	CHECK(m.n == 0);
	CHECK(!ot_id_map_contains(&m, 0));
	ot_id_map_format(&m, buf, sizeof(buf));
	CHECK_STR(buf, "none");

	struct {
		const char *text;
		const char *msg;
	} bad[] = {
		{ "0 0\n", "line 1: not three" },
		{ "0 0 1 1\n", "line 1: more than three fields" },
		{ "0 0 1\n\n", "line 2: not three" },
		{ "0 0 1\n1 1 x\n", "line 2: not three" },
		{ "-1 0 1\n", "not three" },
		{ "+1 0 1\n", "not three" },
		{ "0 0 1x\n", "not three" },
		{ "0,0,1\n", "not three" },
		{ "0 0 4294967296\n", "not three" },       /* over 32 bits */
		{ "99999999999999999999 0 1\n", "not three" },
		{ "0 0 0\n", "line 1: count 0" },
		/* inside + count wraps 32 bits (the kernel refuses it). */
		{ "1 0 4294967295\n", "line 1: extent passes 4294967294" },
		{ "4294967295 0 1\n", "extent passes" },
		{ "4294967295 0 4294967295\n", "extent passes" },
		{ "0 1 4294967295\n", "extent passes" },  /* outside wraps */
		{ "0 0 1\r\n", "not three" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i].text, &m, err, sizeof(err)) != -1) {
			fprintf(stderr, "accepted: \"%s\"\n", bad[i].text);
			test_failures++;
		}
		CHECK_CONTAINS(err, bad[i].msg);
	}
	/* A NUL byte inside the length. */
	CHECK(ot_id_map_parse("0 0 1\n\0002 2 1\n", 12, &m, err, sizeof(err)) == -1);
	CHECK_CONTAINS(err, "NUL");
	/* len is respected: the text need not be terminated. */
	CHECK(ot_id_map_parse("0 0 10 junk", 5, &m, err, sizeof(err)) == 0);
	CHECK(m.n == 1 && m.e[0].count == 1);

	/* The kernel's limit on extents. */
	{
		size_t cap = (OT_ID_MAP_MAX + 1) * 32;
		char *many = malloc(cap);
		size_t used = 0;

		CHECK(many != NULL);
		if (!many)
			return;
		for (unsigned i = 0; i < OT_ID_MAP_MAX; i++)
			used += (size_t)snprintf(many + used, cap - used,
						 "%u %u 1\n", i * 2, i * 2);
		CHECK(ot_id_map_parse(many, used, &m, err, sizeof(err)) == 0);
		CHECK(m.n == OT_ID_MAP_MAX);
		/* A long list is cut short in messages, not overflowed. */
		ot_id_map_format(&m, buf, 40);
		CHECK(strlen(buf) < 40);
		CHECK_STR(buf + strlen(buf) - 5, ", ...");
		used += (size_t)snprintf(many + used, cap - used, "9999 9999 1\n");
		CHECK(ot_id_map_parse(many, used, &m, err, sizeof(err)) == -1);
		CHECK_CONTAINS(err, "more than 340 extents");
		free(many);
	}
}

static void test_check_ids(void)
{
	const char *full = "0 0 4294967295\n";
	const char *guest = "0 1000000000 65536\n1000000 2000000 1000000\n";
	gid_t gids[] = { 100, 1000001, 70000 };
	char err[512];

	CHECK(ot_check_ids_in_maps(full, strlen(full), full, strlen(full), 99,
				   99, gids, 3, err, sizeof(err)) == OT_IDS_MAPPED);
	CHECK(ot_check_ids_in_maps(guest, strlen(guest), guest, strlen(guest),
				   1234567, 1234567, gids, 2, err,
				   sizeof(err)) == OT_IDS_MAPPED);
	CHECK(ot_check_ids_in_maps(guest, strlen(guest), guest, strlen(guest),
				   1234567, 1234567, NULL, 5, err,
				   sizeof(err)) == OT_IDS_MAPPED);

	CHECK(ot_check_ids_in_maps(guest, strlen(guest), guest, strlen(guest),
				   3000000, 1234567, NULL, 0, err,
				   sizeof(err)) == OT_IDS_UNMAPPED);
	CHECK_STR(err, "the job's uid 3000000 is outside this guest's user ids (0-65535, 1000000-1999999): the site's guest definition (jobUsers) must cover it");
	CHECK(ot_check_ids_in_maps(guest, strlen(guest), "0 0 10\n", 7,
				   1234567, 10, NULL, 0, err,
				   sizeof(err)) == OT_IDS_UNMAPPED);
	CHECK_STR(err, "the job's gid 10 is outside this guest's group ids (0-9): the site's guest definition (jobUsers) must cover it");
	CHECK(ot_check_ids_in_maps(guest, strlen(guest), guest, strlen(guest),
				   1234567, 1234567, gids, 3, err,
				   sizeof(err)) == OT_IDS_UNMAPPED);
	CHECK_CONTAINS(err, "the job's supplementary gid 70000 is outside this guest's group ids (");

	CHECK(ot_check_ids_in_maps("0 0\n", 4, full, strlen(full), 0, 0, NULL,
				   0, err, sizeof(err)) == OT_IDS_UNCHECKED);
	CHECK_STR(err, "uid_map: line 1: not three unsigned 32-bit numbers \"inside outside count\"");
	CHECK(ot_check_ids_in_maps(full, strlen(full), "x", 1, 0, 0, NULL, 0,
				   err, sizeof(err)) == OT_IDS_UNCHECKED);
	CHECK_CONTAINS(err, "gid_map: ");

	/* This process's own maps: its ids are mapped, (uid_t)-1 never is. */
	gid_t own[] = { getegid() };

	CHECK(ot_check_ids(getuid(), getgid(), own, 1, err, sizeof(err)) ==
	      OT_IDS_MAPPED);
	CHECK(ot_check_ids((uid_t)-1, getgid(), NULL, 0, err, sizeof(err)) ==
	      OT_IDS_UNMAPPED);
	CHECK_CONTAINS(err, "the job's uid 4294967295 is outside this guest's user ids (");
}

/* ---- names, ids, home ---- */

static void test_names_and_ids(void)
{
	const char *good[] = { "alice", "a", "_", "ab12cde", "1234567",
			       "first.last", "user@EXAMPLE.ORG", "x-y_z",
			       "A234567890123456789012345678901234567890123456789012345678901234" };
	const char *bad[] = { "", "-x", ".x", "@x", "x.", "x@", "x-", ".", "..",
			      "a b", "a:b", "a\nb", "a/b", "a$", "a%u", "é",
			      "A2345678901234567890123456789012345678901234567890123456789012345" };
	uint32_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(ot_user_name_valid(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ot_user_name_valid(bad[i])) {
			fprintf(stderr, "name accepted: \"%s\"\n", bad[i]);
			test_failures++;
		}
	}

	CHECK(ot_parse_id("0", &v) == 0 && v == 0);
	CHECK(ot_parse_id("1234567", &v) == 0 && v == 1234567);
	CHECK(ot_parse_id("4294967294", &v) == 0 && v == 4294967294u);
	const char *bad_ids[] = { "", "-1", "+1", " 1", "1 ", "01", "1e3",
				  "4294967295", "4294967296", "99999999999",
				  "0x10" };

	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		if (ot_parse_id(bad_ids[i], &v) == 0) {
			fprintf(stderr, "id accepted: \"%s\"\n", bad_ids[i]);
			test_failures++;
		}
	}
}

static void test_home(void)
{
	char err[256], buf[4096];

	CHECK(ot_home_pattern_check(OT_HOME_DEFAULT, err, sizeof(err)) == 0);
	CHECK(ot_home_expand(OT_HOME_DEFAULT, "alice", buf, sizeof(buf)) == 0);
	CHECK_STR(buf, "/home/alice");
	CHECK(ot_home_pattern_check("/data/%u/home%%/%u", err, sizeof(err)) == 0);
	CHECK(ot_home_expand("/data/%u/home%%/%u", "bo", buf, sizeof(buf)) == 0);
	CHECK_STR(buf, "/data/bo/home%/bo");
	CHECK(ot_home_pattern_check("/nonexistent", err, sizeof(err)) == 0);
	CHECK(ot_home_expand("/nonexistent", "bo", buf, sizeof(buf)) == 0);
	CHECK_STR(buf, "/nonexistent");
	/* Too small a buffer fails instead of truncating. */
	CHECK(ot_home_expand("/home/%u", "alice", buf, 11) == -1);
	CHECK(ot_home_expand("/home/%u", "alice", buf, 12) == 0);

	struct {
		const char *pattern;
		const char *msg;
	} bad[] = {
		{ "", "absolute path" },
		{ "home/%u", "absolute path" },
		{ "%u", "absolute path" },
		{ "/home/%U", "only %u" },
		{ "/home/%", "only %u" },
		{ "/home/%d", "only %u" },
		{ "/home:/%u", "':'" },
		{ "/home/%u\nevil::0:0::/:/bin/sh", "control" },
		{ "/home/\t%u", "control" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(ot_home_pattern_check(bad[i].pattern, err, sizeof(err)) == -1);
		CHECK_CONTAINS(err, bad[i].msg);
		CHECK(ot_home_expand(bad[i].pattern, "x", buf, sizeof(buf)) == -1);
	}
	/* Checked against the longest name: 64 %u's cannot fit in PATH_MAX. */
	{
		char many[200] = "/";

		for (int i = 0; i < 64; i++)
			strcat(many, "%u");
		CHECK(ot_home_pattern_check(many, err, sizeof(err)) == -1);
		CHECK_CONTAINS(err, "once expanded");
	}
}

static void test_env(void)
{
	struct ot_job_user u;
	char err[512];

	unsetenv("SLURM_JOB_USER");
	setenv("SLURM_JOB_UID", "1234567", 1);
	setenv("SLURM_JOB_GID", "1234567", 1);
	CHECK(ot_job_user_from_env(&u, err, sizeof(err)) == -1);
	CHECK_STR(err, "SLURM_JOB_USER is not set in the prolog's environment");

	setenv("SLURM_JOB_USER", "alice", 1);
	CHECK(ot_job_user_from_env(&u, err, sizeof(err)) == 0);
	CHECK_STR(u.name, "alice");
	CHECK(u.uid == 1234567 && u.gid == 1234567);

	unsetenv("SLURM_JOB_GID");
	CHECK(ot_job_user_from_env(&u, err, sizeof(err)) == -1);
	CHECK_STR(err, "SLURM_JOB_GID is not set in the prolog's environment");

	setenv("SLURM_JOB_GID", "100x", 1);
	CHECK(ot_job_user_from_env(&u, err, sizeof(err)) == -1);
	CHECK_STR(err, "SLURM_JOB_GID \"100x\" is not a gid");
	setenv("SLURM_JOB_GID", "100", 1);
	setenv("SLURM_JOB_UID", "-1", 1);
	CHECK(ot_job_user_from_env(&u, err, sizeof(err)) == -1);
	CHECK_STR(err, "SLURM_JOB_UID \"-1\" is not a uid");

	setenv("SLURM_JOB_UID", "1234567", 1);
	setenv("SLURM_JOB_USER", "evil:x:0:0::/:/bin/sh\nroot2", 1);
	CHECK(ot_job_user_from_env(&u, err, sizeof(err)) == -1);
	CHECK_CONTAINS(err, "SLURM_JOB_USER \"evil:x:0:0::/:/bin/sh?root2\" is not a name this plugin writes into passwd");

	unsetenv("SLURM_JOB_USER");
	unsetenv("SLURM_JOB_UID");
	unsetenv("SLURM_JOB_GID");
}

/* ---- passwd and group in a directory of their own ---- */

static const char base_passwd[] =
	"root:x:0:0:root:/root:/bin/bash\n"
	"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
	"slurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n"
	"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char base_group[] =
	"root:x:0:\n"
	"users:x:100:\n"
	"staff:x:50:\n"
	"carol:x:7:\n"
	"nogroup:x:65534:\n";

static char etc[64];

static void write_file(const char *name, const char *text, mode_t mode)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", etc, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	CHECK(fchmod(fd, mode) == 0);
	close(fd);
}

/* The file's content (static buffer, per name), "" if unreadable. */
static const char *read_file(const char *name)
{
	static char buf[2][65536];
	char *b = strcmp(name, "passwd") == 0 ? buf[0] : buf[1];
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", etc, name);
	b[0] = '\0';
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return b;
	n = read(fd, b, sizeof(buf[0]) - 1);
	b[n > 0 ? n : 0] = '\0';
	close(fd);
	return b;
}

static struct stat stat_of(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", etc, name);
	memset(&st, 0, sizeof(st));
	CHECK(stat(path, &st) == 0);
	return st;
}

static void reset_etc(void)
{
	write_file("passwd", base_passwd, 0644);
	write_file("group", base_group, 0644);
}

/* No temporary file left behind: the directory holds passwd, group, the lock. */
static void check_no_leftovers(void)
{
	DIR *d = opendir(etc);
	struct dirent *de;

	CHECK(d != NULL);
	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "passwd") && strcmp(de->d_name, "group") &&
		    strcmp(de->d_name, ".pwd.lock")) {
			fprintf(stderr, "left behind: %s\n", de->d_name);
			test_failures++;
		}
	}
	if (d)
		closedir(d);
}

static enum ot_ensure ensure(const char *name, uint32_t uid, uint32_t gid,
			     const char *home, char *msg, size_t msglen)
{
	struct ot_job_user u;

	snprintf(u.name, sizeof(u.name), "%s", name);
	u.uid = uid;
	u.gid = gid;
	msg[0] = '\0';
	return ot_ensure_job_user(etc, &u, home, msg, msglen);
}

static void test_fresh_and_existing(void)
{
	char msg[1024], want[1024], want_pw[1024];
	struct stat before, after;

	reset_etc();
	CHECK(ensure("alice", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ADDED);
	snprintf(want, sizeof(want),
		 "added alice (uid 1234567, gid 1234567, home /home/alice) to %s/passwd; added group alice (gid 1234567) to %s/group",
		 etc, etc);
	CHECK_STR(msg, want);
	snprintf(want_pw, sizeof(want_pw), "%salice:x:1234567:1234567:Overtime job user:/home/alice:/bin/sh\n",
		 base_passwd);
	CHECK_STR(read_file("passwd"), want_pw);
	snprintf(want, sizeof(want), "%salice:x:1234567:\n", base_group);
	CHECK_STR(read_file("group"), want);
	CHECK((stat_of("passwd").st_mode & 07777) == 0644);
	CHECK((stat_of("group").st_mode & 07777) == 0644);
	check_no_leftovers();

	/* Again (the next job of the same user): nothing written, not even rewritten. */
	before = stat_of("passwd");
	CHECK(ensure("alice", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_PRESENT);
	CHECK_CONTAINS(msg, "alice (uid 1234567) is in ");
	after = stat_of("passwd");
	CHECK(before.st_ino == after.st_ino);
	CHECK_STR(read_file("passwd"), want_pw);
	CHECK_STR(read_file("group"), want);

	/* The uid under another name (the image's own): left alone. */
	reset_etc();
	CHECK(ensure("slurmuser", 64030, 64030, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_PRESENT);
	CHECK_CONTAINS(msg, "uid 64030 is in ");
	CHECK_CONTAINS(msg, "already, as slurm: not adding slurmuser");
	CHECK_STR(read_file("passwd"), base_passwd);
	CHECK_STR(read_file("group"), base_group); /* no group for another's uid */

	/* home=, and a passwd without a final newline. */
	write_file("passwd", "root:x:0:0:root:/root:/bin/bash", 0644);
	CHECK(ensure("bo", 2000001, 100, "/data/%u/home", msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);
	CHECK_STR(read_file("passwd"),
		  "root:x:0:0:root:/root:/bin/bash\n"
		  "bo:x:2000001:100:Overtime job user:/data/bo/home:/bin/sh\n");
	check_no_leftovers();
}

static void test_clashes(void)
{
	char msg[1024];

	/* A name taken by another uid: never a second entry for a name. */
	reset_etc();
	CHECK(ensure("nobody", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ERROR);
	CHECK_CONTAINS(msg, "not adding nobody (uid 1234567) to ");
	CHECK_CONTAINS(msg, "/passwd: that name is uid 65534 there");
	CHECK_STR(read_file("passwd"), base_passwd);
	CHECK_STR(read_file("group"), base_group);

	/* Same for a line whose uid cannot be read. */
	write_file("passwd", "root:x:0:0:root:/root:/bin/bash\nodd:x:zz:0::/:/bin/sh\n",
		   0644);
	CHECK(ensure("odd", 1234567, 100, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ERROR);
	CHECK_CONTAINS(msg, "that name is there already");

	/* Names are whole fields: "root" does not clash with "roo" or "rooter". */
	reset_etc();
	CHECK(ensure("roo", 3000001, 100, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);
	CHECK(ensure("rooter", 3000002, 100, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);

	/* gid == uid, but a group of that name has another gid: passwd only. */
	reset_etc();
	CHECK(ensure("carol", 3000, 3000, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ERROR);
	CHECK_CONTAINS(msg, "added carol (uid 3000, gid 3000, home /home/carol) to ");
	CHECK_CONTAINS(msg, "; not adding group carol (gid 3000) to ");
	CHECK_CONTAINS(msg, "/group: that name is gid 7 there");
	CHECK_CONTAINS(read_file("passwd"), "carol:x:3000:3000:");
	CHECK_STR(read_file("group"), base_group);

	/* gid == uid and a group has that gid already: groups left alone. */
	reset_etc();
	CHECK(ensure("erin", 50, 50, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);
	CHECK_CONTAINS(read_file("passwd"), "erin:x:50:50:");
	CHECK_STR(read_file("group"), base_group);

	/* gid != uid: no group, even when none has the gid (id shows the number). */
	CHECK(ensure("frank", 4000001, 4000002, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ADDED);
	CHECK_STR(read_file("group"), base_group);

	/* The passwd entry exists, its user-private group does not: added. */
	reset_etc();
	write_file("passwd", "root:x:0:0:root:/root:/bin/bash\ngina:x:5000:5000::/:/bin/sh\n",
		   0644);
	CHECK(ensure("gina", 5000, 5000, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);
	CHECK_CONTAINS(msg, "gina (uid 5000) is in ");
	CHECK_CONTAINS(msg, "; added group gina (gid 5000) to ");
	CHECK_CONTAINS(read_file("group"), "gina:x:5000:\n");
	check_no_leftovers();
}

static void test_refused(void)
{
	char msg[1024];
	char path[128];

	reset_etc();
	const char *bad[] = { "a:b", "a\nb", "", "-rf", "x." };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(ensure(bad[i], 1234567, 1234567, OT_HOME_DEFAULT, msg,
			     sizeof(msg)) == OT_ENSURE_ERROR);
		CHECK_STR(msg, "refusing an invalid user name or id");
	}
	CHECK(ensure("alice", 4294967295u, 1, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ERROR);
	CHECK(ensure("alice", 1, 4294967295u, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ERROR);
	/* A bad pattern that got this far writes nothing either. */
	CHECK(ensure("alice", 1234567, 1234567, "/x:%u", msg, sizeof(msg)) ==
	      OT_ENSURE_ERROR);
	CHECK_CONTAINS(msg, "does not expand");
	CHECK_STR(read_file("passwd"), base_passwd);
	CHECK_STR(read_file("group"), base_group);

	/* No passwd: an error, never a new passwd holding only the job user. */
	snprintf(path, sizeof(path), "%s/passwd", etc);
	unlink(path);
	CHECK(ensure("alice", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ERROR);
	CHECK_CONTAINS(msg, "/passwd: No such file or directory");
	CHECK(access(path, F_OK) == -1);

	/* A symlink is not replaced. */
	CHECK(symlink("/dev/null", path) == 0);
	CHECK(ensure("alice", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ERROR);
	unlink(path);
	check_no_leftovers();
}

static void test_mode_kept(void)
{
	char msg[1024];

	/* Whatever mode the file had, not mkstemp's 0600 nor the umask's. */
	reset_etc();
	write_file("passwd", base_passwd, 0604);
	write_file("group", base_group, 0640);
	mode_t old = umask(077);

	CHECK(ensure("hana", 6000, 6000, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);
	umask(old);
	CHECK((stat_of("passwd").st_mode & 07777) == 0604);
	CHECK((stat_of("group").st_mode & 07777) == 0640);
	CHECK(stat_of("passwd").st_uid == getuid());

	reset_etc();
	CHECK(ensure("ivan", 6001, 6001, OT_HOME_DEFAULT, msg, sizeof(msg)) ==
	      OT_ENSURE_ADDED);
	CHECK((stat_of("passwd").st_mode & 07777) == 0644);
	CHECK((stat_of("group").st_mode & 07777) == 0644);
}

/*
 * Prologs of several jobs at once, each adding its user: with the lock and
 * read-modify-rename done under it, no writer's line is lost.
 */
static void test_concurrent(void)
{
	enum { WRITERS = 8, ROUNDS = 5 };
	pid_t pids[WRITERS];
	int go[2];

	reset_etc();
	CHECK(pipe(go) == 0);
	for (int w = 0; w < WRITERS; w++) {
		pids[w] = fork();
		CHECK(pids[w] >= 0);
		if (pids[w] == 0) {
			char msg[1024], name[32], c;
			int fails = 0;

			close(go[1]);
			/* All start together, when the parent closes the pipe. */
			if (read(go[0], &c, 1) < 0)
				_exit(2);
			for (int r = 0; r < ROUNDS; r++) {
				snprintf(name, sizeof(name), "w%dr%d", w, r);
				if (ensure(name, 7000000 + (uint32_t)(w * 100 + r),
					   7000000 + (uint32_t)(w * 100 + r),
					   OT_HOME_DEFAULT, msg,
					   sizeof(msg)) != OT_ENSURE_ADDED) {
					fprintf(stderr, "writer %s: %s\n", name, msg);
					fails++;
				}
			}
			_exit(fails ? 1 : 0);
		}
	}
	close(go[0]);
	close(go[1]);
	for (int w = 0; w < WRITERS; w++) {
		int status;

		CHECK(waitpid(pids[w], &status, 0) == pids[w]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}

	const char *pw = read_file("passwd");
	const char *gr = read_file("group");

	CHECK(strncmp(pw, base_passwd, strlen(base_passwd)) == 0);
	CHECK(strncmp(gr, base_group, strlen(base_group)) == 0);
	for (int w = 0; w < WRITERS; w++) {
		for (int r = 0; r < ROUNDS; r++) {
			char line[128];
			const char *hit;
			uint32_t id = 7000000 + (uint32_t)(w * 100 + r);

			snprintf(line, sizeof(line),
				 "\nw%dr%d:x:%u:%u:Overtime job user:/home/w%dr%d:/bin/sh\n",
				 w, r, id, id, w, r);
			hit = strstr(pw, line);
			CHECK(hit != NULL);
			CHECK(hit && !strstr(hit + 1, line)); /* exactly once */
			snprintf(line, sizeof(line), "\nw%dr%d:x:%u:\n", w, r, id);
			CHECK(strstr(gr, line) != NULL);
		}
	}
	/* Base lines plus one per writer and round, nothing else. */
	int lines = 0;

	for (const char *p = pw; *p; p++)
		lines += *p == '\n';
	CHECK(lines == 4 + WRITERS * ROUNDS);
	CHECK((stat_of("passwd").st_mode & 07777) == 0644);
	check_no_leftovers();
}

/*
 * The lock is the shadow suite's: a writer waits for another holder (useradd,
 * say), and a job whose user is in place already does not wait at all.
 */
static void test_lock(void)
{
	int hold[2], held[2];
	pid_t holder, writer;
	char c = 0, msg[1024];
	int status;

	reset_etc();
	CHECK(ensure("alice", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_ADDED);
	CHECK(pipe(hold) == 0 && pipe(held) == 0);
	holder = fork();
	if (holder == 0) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		char path[128];
		int fd;

		close(hold[1]);
		close(held[0]);
		snprintf(path, sizeof(path), "%s/.pwd.lock", etc);
		fd = open(path, O_WRONLY | O_CREAT, 0600);
		if (fd < 0 || fcntl(fd, F_SETLKW, &fl) < 0)
			_exit(1);
		/* Locked: tell the parent, hold until it closes the pipe. */
		if (write(held[1], "l", 1) != 1 || read(hold[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(held[1]);
	close(hold[0]);
	CHECK(read(held[0], &c, 1) == 1);

	/* In place already: answered without the lock (alarm: fail, not hang). */
	alarm(10);
	CHECK(ensure("alice", 1234567, 1234567, OT_HOME_DEFAULT, msg,
		     sizeof(msg)) == OT_ENSURE_PRESENT);
	alarm(0);

	/* A new user waits for the holder. */
	writer = fork();
	if (writer == 0) {
		close(hold[1]); /* only the parent may keep the holder holding */
		alarm(10);
		_exit(ensure("bob", 1234568, 100, OT_HOME_DEFAULT, msg,
			     sizeof(msg)) == OT_ENSURE_ADDED ? 0 : 1);
	}
	usleep(200 * 1000);
	CHECK(waitpid(writer, &status, WNOHANG) == 0);
	CHECK(strstr(read_file("passwd"), "bob:") == NULL);
	close(hold[1]); /* the holder exits, its lock goes */
	CHECK(waitpid(holder, &status, 0) == holder);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(waitpid(writer, &status, 0) == writer);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_CONTAINS(read_file("passwd"), "\nbob:x:1234568:100:");
	close(held[0]);
}

int main(void)
{
	char path[128];

	test_map_parse();
	test_check_ids();
	test_names_and_ids();
	test_home();
	test_env();

	snprintf(etc, sizeof(etc), "/tmp/ot-etc-XXXXXX");
	if (!mkdtemp(etc)) {
		perror("mkdtemp");
		return 1;
	}
	test_fresh_and_existing();
	test_clashes();
	test_refused();
	test_mode_kept();
	test_lock();
	test_concurrent();
	snprintf(path, sizeof(path), "%s/passwd", etc);
	unlink(path);
	snprintf(path, sizeof(path), "%s/group", etc);
	unlink(path);
	snprintf(path, sizeof(path), "%s/.pwd.lock", etc);
	unlink(path);
	rmdir(etc);

	if (test_failures) {
		fprintf(stderr, "test_identity: %d failure(s)\n", test_failures);
		return 1;
	}
	printf("test_identity: ok\n");
	return 0;
}
