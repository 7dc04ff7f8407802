/*
 * The job user's identity in the compute guest (see identity.h): the step's
 * ids against the guest's user namespace, and the user's passwd and group
 * entries.
 */
#define _GNU_SOURCE /* mkostemp */

#include "identity.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <shadow.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest id a map can cover: the kernel refuses extents that reach 2^32-1. */
#define ID_END_MAX 4294967295u
/* A /proc map file: at most OT_ID_MAP_MAX lines of 33 characters. */
#define MAP_TEXT_MAX 16384

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Decimal digits at *p (before end) into *out, at most UINT32_MAX; advances *p. */
static int scan_u32(const char **p, const char *end, uint32_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s == end || !is_digit(*s))
		return -1;
	for (; s < end && is_digit(*s); s++) {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return -1;
	}
	*p = s;
	*out = (uint32_t)v;
	return 0;
}

int ot_id_map_parse(const char *text, size_t len, struct ot_id_map *map,
		    char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	size_t line = 0;

	map->n = 0;
	if (len && memchr(text, '\0', len)) {
		snprintf(err, errlen, "a NUL byte in the map");
		return -1;
	}
	/* A final newline ends the last line; it does not start an empty one. */
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct ot_id_extent ext;
		uint32_t *fields[3] = { &ext.inside, &ext.outside, &ext.count };

		if (!eol)
			eol = end;
		line++;
		for (int i = 0; i < 3; i++) {
			while (p < eol && is_blank(*p))
				p++;
			/* Digits only, each field ended by a blank or the line's end. */
			if (scan_u32(&p, eol, fields[i]) < 0 ||
			    (p < eol && !is_blank(*p))) {
				snprintf(err, errlen,
					 "line %zu: not three unsigned 32-bit numbers \"inside outside count\"",
					 line);
				return -1;
			}
		}
		while (p < eol && is_blank(*p))
			p++;
		if (p != eol) {
			snprintf(err, errlen, "line %zu: more than three fields", line);
			return -1;
		}
		/*
		 * What the kernel refuses to write (kernel/user_namespace.c): an
		 * empty extent, or one that wraps past 2^32-1 on either side.
		 */
		if (ext.count == 0) {
			snprintf(err, errlen, "line %zu: count 0", line);
			return -1;
		}
		if ((uint64_t)ext.inside + ext.count > ID_END_MAX ||
		    (uint64_t)ext.outside + ext.count > ID_END_MAX) {
			snprintf(err, errlen, "line %zu: extent passes 4294967294",
				 line);
			return -1;
		}
		if (map->n == OT_ID_MAP_MAX) {
			snprintf(err, errlen, "more than %d extents", OT_ID_MAP_MAX);
			return -1;
		}
		map->e[map->n++] = ext;
		p = eol < end ? eol + 1 : end;
	}
	return 0;
}

int ot_id_map_contains(const struct ot_id_map *map, uint32_t id)
{
	for (size_t i = 0; i < map->n; i++) {
		const struct ot_id_extent *e = &map->e[i];

		/* inside + count <= 2^32-1 after parsing: no overflow in 64 bits either way. */
		if (id >= e->inside && (uint64_t)id < (uint64_t)e->inside + e->count)
			return 1;
	}
	return 0;
}

void ot_id_map_format(const struct ot_id_map *map, char *buf, size_t buflen)
{
	size_t used = 0;

	if (buflen == 0)
		return;
	buf[0] = '\0';
	if (map->n == 0) {
		snprintf(buf, buflen, "none");
		return;
	}
	for (size_t i = 0; i < map->n; i++) {
		const struct ot_id_extent *e = &map->e[i];
		char range[32];
		size_t n;

		if (e->count == 1)
			snprintf(range, sizeof(range), "%s%" PRIu32,
				 i ? ", " : "", e->inside);
		else
			snprintf(range, sizeof(range), "%s%" PRIu32 "-%" PRIu32,
				 i ? ", " : "", e->inside,
				 e->inside + (e->count - 1));
		n = strlen(range);
		/* Room for this range and, if more follow, a ", ..." after it. */
		if (used + n + (i + 1 < map->n ? 5 : 0) >= buflen) {
			if (used + 5 < buflen)
				snprintf(buf + used, buflen - used, "%s...",
					 i ? ", " : "");
			return;
		}
		memcpy(buf + used, range, n + 1);
		used += n;
	}
}

/* err = the message for an unmapped id, see identity.h. */
static int check_id(const struct ot_id_map *map, uint32_t id,
		    const char *what, const char *ids, char *err, size_t errlen)
{
	char ranges[256];

	if (ot_id_map_contains(map, id))
		return 0;
	ot_id_map_format(map, ranges, sizeof(ranges));
	snprintf(err, errlen,
		 "the job's %s %" PRIu32 " is outside this guest's %s (%s): the site's guest definition (jobUsers) must cover it",
		 what, id, ids, ranges);
	return -1;
}

enum ot_ids_check ot_check_ids_in_maps(const char *uid_map, size_t uid_map_len,
				       const char *gid_map, size_t gid_map_len,
				       uid_t uid, gid_t gid, const gid_t *gids,
				       int ngids, char *err, size_t errlen)
{
	/* 4 KiB each: on the heap, and no state kept between steps. */
	struct ot_id_map *uids = malloc(sizeof(*uids));
	struct ot_id_map *gmap = malloc(sizeof(*gmap));
	enum ot_ids_check rc = OT_IDS_UNCHECKED;
	char why[128];

	if (!uids || !gmap)
		snprintf(err, errlen, "out of memory");
	else if (ot_id_map_parse(uid_map, uid_map_len, uids, why, sizeof(why)) < 0)
		snprintf(err, errlen, "uid_map: %s", why);
	else if (ot_id_map_parse(gid_map, gid_map_len, gmap, why, sizeof(why)) < 0)
		snprintf(err, errlen, "gid_map: %s", why);
	else
		rc = OT_IDS_MAPPED;
	if (rc == OT_IDS_MAPPED &&
	    (check_id(uids, uid, "uid", "user ids", err, errlen) < 0 ||
	     check_id(gmap, gid, "gid", "group ids", err, errlen) < 0))
		rc = OT_IDS_UNMAPPED;
	for (int i = 0; rc == OT_IDS_MAPPED && gids && i < ngids; i++)
		if (check_id(gmap, gids[i], "supplementary gid", "group ids",
			     err, errlen) < 0)
			rc = OT_IDS_UNMAPPED;
	free(uids);
	free(gmap);
	return rc;
}

/*
 * Read a /proc map into buf (NUL-terminated); its length, or -1 with errno.
 * 340 lines of 33 characters fit in MAP_TEXT_MAX.
 */
static ssize_t read_map(const char *path, char *buf, size_t buflen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return -1;
	while (len + 1 < buflen) {
		ssize_t n = read(fd, buf + len, buflen - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len + 1 >= buflen) {
		errno = EFBIG;
		return -1;
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

enum ot_ids_check ot_check_ids(uid_t uid, gid_t gid, const gid_t *gids,
			       int ngids, char *err, size_t errlen)
{
	char *uid_map = malloc(MAP_TEXT_MAX), *gid_map = malloc(MAP_TEXT_MAX);
	enum ot_ids_check rc = OT_IDS_UNCHECKED;
	ssize_t ulen = -1, glen = -1;

	if (!uid_map || !gid_map)
		snprintf(err, errlen, "out of memory");
	else if ((ulen = read_map("/proc/self/uid_map", uid_map, MAP_TEXT_MAX)) < 0)
		snprintf(err, errlen, "/proc/self/uid_map: %s", strerror(errno));
	else if ((glen = read_map("/proc/self/gid_map", gid_map, MAP_TEXT_MAX)) < 0)
		snprintf(err, errlen, "/proc/self/gid_map: %s", strerror(errno));
	else
		rc = ot_check_ids_in_maps(uid_map, (size_t)ulen, gid_map,
					  (size_t)glen, uid, gid, gids, ngids,
					  err, errlen);
	free(uid_map);
	free(gid_map);
	return rc;
}

/* ---- passwd and group ---- */

/*
 * Longest expanded home directory, with the NUL, and longest path of the files
 * (etc_dir is "/etc" outside the tests).  Small enough that every message
 * fits in a log line whole.
 */
#define HOME_MAX 256
#define DB_PATH_MAX 256
/* Larger than any guest's passwd or group; anything bigger is not ours to rewrite. */
#define DB_MAX (16 * 1024 * 1024)

static const char gecos[] = "Overtime job user";
static const char shell[] = "/bin/sh";

/* Expand pattern into buf; -1 with the reason in err (which may be NULL). */
static int expand(const char *pattern, const char *name, char *buf,
		  size_t buflen, char *err, size_t errlen)
{
	size_t used = 0;

	if (pattern[0] != '/') {
		if (err)
			snprintf(err, errlen, "must be an absolute path");
		return -1;
	}
	for (const char *p = pattern; *p; p++) {
		const char *piece = p;
		size_t n = 1;

		if (*p == ':' || (unsigned char)*p < 0x20 || *p == 0x7f) {
			if (err)
				snprintf(err, errlen, "%s", *p == ':' ?
					 "must not contain ':' (the passwd field separator)" :
					 "must not contain control characters");
			return -1;
		}
		if (*p == '%') {
			p++;
			if (*p == 'u') {
				piece = name;
				n = strlen(name);
			} else if (*p == '%') {
				piece = "%";
			} else {
				if (err)
					snprintf(err, errlen, "only %%u (the user name) and %%%% may follow '%%'");
				return -1;
			}
		}
		if (used + n >= buflen) {
			if (err)
				snprintf(err, errlen, "longer than %zu characters once expanded",
					 buflen - 1);
			return -1;
		}
		memcpy(buf + used, piece, n);
		used += n;
	}
	buf[used] = '\0';
	return 0;
}

int ot_home_pattern_check(const char *pattern, char *err, size_t errlen)
{
	char name[OT_USER_NAME_MAX + 1];
	char home[HOME_MAX];

	/* The longest name a prolog may meet, so a pattern that fits here fits always. */
	memset(name, 'x', OT_USER_NAME_MAX);
	name[OT_USER_NAME_MAX] = '\0';
	return expand(pattern, name, home, sizeof(home), err, errlen);
}

int ot_home_expand(const char *pattern, const char *name, char *buf,
		   size_t buflen)
{
	return expand(pattern, name, buf, buflen, NULL, 0);
}

static int name_char(char c, int edge)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) ||
	    c == '_')
		return 1;
	return !edge && (c == '.' || c == '@' || c == '-');
}

int ot_user_name_valid(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > OT_USER_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!name_char(name[i], i == 0 || i == len - 1))
			return 0;
	return 1;
}

int ot_parse_id(const char *s, uint32_t *out)
{
	const char *p = s, *end = s + strlen(s);
	uint32_t v;

	/* "0" alone, or no leading zero: Slurm prints %u. */
	if ((s[0] == '0' && s[1] != '\0') || scan_u32(&p, end, &v) < 0 ||
	    p != end || v == UINT32_MAX)
		return -1;
	*out = v;
	return 0;
}

/* s, shortened and with control characters as '?', for a log line. */
static void loggable(const char *s, char *buf, size_t buflen)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < buflen; i++)
		buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	buf[i] = '\0';
}

int ot_job_user_from_env(struct ot_job_user *u, char *err, size_t errlen)
{
	const char *name = getenv("SLURM_JOB_USER");
	const char *uid = getenv("SLURM_JOB_UID");
	const char *gid = getenv("SLURM_JOB_GID");
	char shown[80];

	if (!name || !uid || !gid) {
		snprintf(err, errlen, "%s is not set in the prolog's environment",
			 !name ? "SLURM_JOB_USER" : !uid ? "SLURM_JOB_UID" : "SLURM_JOB_GID");
		return -1;
	}
	if (!ot_user_name_valid(name)) {
		loggable(name, shown, sizeof(shown));
		snprintf(err, errlen,
			 "SLURM_JOB_USER \"%s\" is not a name this plugin writes into passwd (1-%d characters of A-Za-z0-9_.@-, first and last a letter, digit or _)",
			 shown, OT_USER_NAME_MAX);
		return -1;
	}
	if (ot_parse_id(uid, &u->uid) < 0) {
		loggable(uid, shown, sizeof(shown));
		snprintf(err, errlen, "SLURM_JOB_UID \"%s\" is not a uid", shown);
		return -1;
	}
	if (ot_parse_id(gid, &u->gid) < 0) {
		loggable(gid, shown, sizeof(shown));
		snprintf(err, errlen, "SLURM_JOB_GID \"%s\" is not a gid", shown);
		return -1;
	}
	snprintf(u->name, sizeof(u->name), "%s", name);
	return 0;
}

/* A whole passwd or group file, with what rename must carry over. */
struct db {
	char path[DB_PATH_MAX];
	char *text;
	size_t len;
	struct stat st;
};

static void db_free(struct db *db)
{
	free(db->text);
	db->text = NULL;
}

static int db_read(const char *dir, const char *file, struct db *db,
		   char *err, size_t errlen)
{
	size_t cap = 0;
	int fd;

	db->text = NULL;
	db->len = 0;
	if ((size_t)snprintf(db->path, sizeof(db->path), "%s/%s", dir, file) >=
	    sizeof(db->path)) {
		snprintf(err, errlen, "%s/%s: path too long", dir, file);
		return -1;
	}
	/* Never create it: a passwd with only the job user in it would lose root. */
	fd = open(db->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &db->st) < 0) {
		snprintf(err, errlen, "%s: %s", db->path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(db->st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", db->path);
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t n;

		if (db->len + 1 >= cap) {
			char *grown;

			cap = cap ? cap * 2 : 8192;
			if (cap > DB_MAX + 1) {
				snprintf(err, errlen, "%s: larger than %d bytes",
					 db->path, DB_MAX);
				goto fail;
			}
			grown = realloc(db->text, cap);
			if (!grown) {
				snprintf(err, errlen, "%s: out of memory", db->path);
				goto fail;
			}
			db->text = grown;
		}
		n = read(fd, db->text + db->len, cap - 1 - db->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "%s: %s", db->path, strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		db->len += (size_t)n;
	}
	close(fd);
	db->text[db->len] = '\0';
	return 0;
fail:
	close(fd);
	db_free(db);
	return -1;
}

/* What a passwd or group text (name first, id third) says about a name and an id. */
struct db_match {
	int id_found;        /* a line has the id ... */
	char id_name[80];    /* ... with this name (loggable) */
	int name_found;      /* a line has the name ... */
	int name_id_valid;   /* ... and a readable id ... */
	uint32_t name_id;    /* ... this one */
};

/*
 * First match of each, as NSS's files module would return it; empty and
 * '#' lines skipped as it does.  Ids in the files are read leniently
 * (leading zeros allowed): someone else wrote them.
 */
static void db_match(const struct db *db, const char *name, uint32_t id,
		     struct db_match *m)
{
	const char *p = db->text, *end = db->text + db->len;
	size_t name_len = strlen(name);

	memset(m, 0, sizeof(*m));
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *f[4];
		int nf = 1;

		if (!eol)
			eol = end;
		f[0] = p;
		for (const char *q = p; q < eol && nf < 4; q++)
			if (*q == ':')
				f[nf++] = q + 1;
		if (p < eol && *p != '#' && nf >= 3) {
			size_t flen = (size_t)(f[1] - 1 - f[0]);
			const char *idp = f[2];
			const char *idend = nf > 3 ? f[3] - 1 : eol;
			uint32_t v;
			int id_ok = scan_u32(&idp, idend, &v) == 0 && idp == idend;

			if (id_ok && v == id && !m->id_found) {
				char raw[80];
				size_t n = flen < sizeof(raw) - 1 ? flen : sizeof(raw) - 1;

				memcpy(raw, f[0], n);
				raw[n] = '\0';
				loggable(raw, m->id_name, sizeof(m->id_name));
				m->id_found = 1;
			}
			if (flen == name_len && memcmp(f[0], name, name_len) == 0 &&
			    !m->name_found) {
				m->name_found = 1;
				m->name_id_valid = id_ok;
				m->name_id = id_ok ? v : 0;
			}
		}
		p = eol < end ? eol + 1 : end;
	}
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Replace db's file with its content plus line, atomically: readers (NSS in
 * every process of the guest) see the old file or the new one, never a
 * half-written one, and a crash leaves at worst a stray temporary file.  The
 * temporary file is in the same directory, so rename stays in one file system.
 */
static int db_append(const char *dir, const struct db *db, const char *line,
		     char *err, size_t errlen)
{
	char tmp[DB_PATH_MAX + 32];
	const char *base = strrchr(db->path, '/') + 1;
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.overtime-XXXXXX", dir,
			     base) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", db->path);
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create a temporary file in %s: %s",
			 dir, strerror(errno));
		return -1;
	}
	/* mkostemp made it 0600 and ours: passwd and group must stay readable by all. */
	if (fchown(fd, db->st.st_uid, db->st.st_gid) < 0 ||
	    fchmod(fd, db->st.st_mode & 07777) < 0 ||
	    write_all(fd, db->text, db->len) < 0 ||
	    (db->len && db->text[db->len - 1] != '\n' && write_all(fd, "\n", 1) < 0) ||
	    write_all(fd, line, strlen(line)) < 0 ||
	    fsync(fd) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0 || rename(tmp, db->path) < 0) {
		snprintf(err, errlen, "cannot replace %s: %s", db->path,
			 strerror(errno));
		unlink(tmp);
		return -1;
	}
	/* The rename itself on disk; best effort: the entry is in place already. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	return 0;
}

/*
 * The shadow suite's lock over passwd, group, shadow and gshadow, which
 * useradd & co. take too: lckpwdf() for /etc; for a test's directory the
 * same lock lckpwdf takes (a whole-file fcntl write lock on .pwd.lock), so
 * concurrent writers in the tests meet the same protocol.  Returns the lock
 * file's descriptor, -2 for lckpwdf, or -1 with the reason in err.
 */
static int db_lock(const char *dir, char *err, size_t errlen)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char path[DB_PATH_MAX];
	int fd;

	if (strcmp(dir, "/etc") == 0) {
		/* Waits up to 15 s for another holder (glibc's timeout). */
		if (lckpwdf() < 0) {
			snprintf(err, errlen, "cannot lock /etc/.pwd.lock (lckpwdf): %s",
				 strerror(errno));
			return -1;
		}
		return -2;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/.pwd.lock", dir) >=
	    sizeof(path)) {
		snprintf(err, errlen, "%s: path too long", dir);
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot lock %s: %s", path, strerror(errno));
		return -1;
	}
	while (fcntl(fd, F_SETLKW, &fl) < 0) {
		if (errno == EINTR)
			continue;
		snprintf(err, errlen, "cannot lock %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void db_unlock(int lock)
{
	if (lock == -2)
		ulckpwdf();
	else if (lock >= 0)
		close(lock); /* releases the fcntl lock */
}

/*
 * The passwd half of ot_ensure_job_user.  *named: the uid's entry carries
 * u->name afterwards (so a user-private group may follow).  With dry set,
 * where it would write it sets *pending instead and returns PRESENT.
 */
static enum ot_ensure ensure_passwd(const char *dir, const struct ot_job_user *u,
				    const char *home_pattern, int dry,
				    int *pending, int *named, char *msg,
				    size_t msglen)
{
	char home[HOME_MAX];
	char line[OT_USER_NAME_MAX + HOME_MAX + 128];
	struct db_match m;
	struct db db;
	int rc;

	*named = 0;
	if (db_read(dir, "passwd", &db, msg, msglen) < 0)
		return OT_ENSURE_ERROR;
	db_match(&db, u->name, u->uid, &m);
	if (m.id_found) {
		*named = strcmp(m.id_name, u->name) == 0;
		if (*named)
			snprintf(msg, msglen, "%s (uid %" PRIu32 ") is in %s already",
				 u->name, u->uid, db.path);
		else
			snprintf(msg, msglen,
				 "uid %" PRIu32 " is in %s already, as %s: not adding %s",
				 u->uid, db.path, m.id_name, u->name);
		db_free(&db);
		return OT_ENSURE_PRESENT;
	}
	if (m.name_found) {
		if (m.name_id_valid)
			snprintf(msg, msglen,
				 "not adding %s (uid %" PRIu32 ") to %s: that name is uid %" PRIu32 " there",
				 u->name, u->uid, db.path, m.name_id);
		else
			snprintf(msg, msglen,
				 "not adding %s (uid %" PRIu32 ") to %s: that name is there already",
				 u->name, u->uid, db.path);
		db_free(&db);
		return OT_ENSURE_ERROR;
	}
	if (ot_home_expand(home_pattern, u->name, home, sizeof(home)) < 0) {
		snprintf(msg, msglen, "not adding %s to %s: home=%s does not expand",
			 u->name, db.path, home_pattern);
		db_free(&db);
		return OT_ENSURE_ERROR;
	}
	if (dry) {
		*pending = 1;
		db_free(&db);
		return OT_ENSURE_PRESENT;
	}
	snprintf(line, sizeof(line), "%s:x:%" PRIu32 ":%" PRIu32 ":%s:%s:%s\n",
		 u->name, u->uid, u->gid, gecos, home, shell);
	rc = db_append(dir, &db, line, msg, msglen);
	if (rc == 0) {
		snprintf(msg, msglen,
			 "added %s (uid %" PRIu32 ", gid %" PRIu32 ", home %s) to %s",
			 u->name, u->uid, u->gid, home, db.path);
		*named = 1;
	}
	db_free(&db);
	return rc == 0 ? OT_ENSURE_ADDED : OT_ENSURE_ERROR;
}

/*
 * The group half: a user-private group NAME:x:GID: when no group has GID.
 * dry and *pending as for ensure_passwd.
 */
static enum ot_ensure ensure_group(const char *dir, const struct ot_job_user *u,
				   int dry, int *pending, char *msg,
				   size_t msglen)
{
	char line[OT_USER_NAME_MAX + 32];
	struct db_match m;
	struct db db;
	int rc;

	if (db_read(dir, "group", &db, msg, msglen) < 0)
		return OT_ENSURE_ERROR;
	db_match(&db, u->name, u->gid, &m);
	if (m.id_found) {
		msg[0] = '\0';
		db_free(&db);
		return OT_ENSURE_PRESENT;
	}
	if (m.name_found) {
		if (m.name_id_valid)
			snprintf(msg, msglen,
				 "not adding group %s (gid %" PRIu32 ") to %s: that name is gid %" PRIu32 " there",
				 u->name, u->gid, db.path, m.name_id);
		else
			snprintf(msg, msglen,
				 "not adding group %s (gid %" PRIu32 ") to %s: that name is there already",
				 u->name, u->gid, db.path);
		db_free(&db);
		return OT_ENSURE_ERROR;
	}
	if (dry) {
		*pending = 1;
		msg[0] = '\0';
		db_free(&db);
		return OT_ENSURE_PRESENT;
	}
	snprintf(line, sizeof(line), "%s:x:%" PRIu32 ":\n", u->name, u->gid);
	rc = db_append(dir, &db, line, msg, msglen);
	if (rc == 0)
		snprintf(msg, msglen, "added group %s (gid %" PRIu32 ") to %s",
			 u->name, u->gid, db.path);
	db_free(&db);
	return rc == 0 ? OT_ENSURE_ADDED : OT_ENSURE_ERROR;
}

/* Both halves, their messages joined into msg. */
static enum ot_ensure ensure_both(const char *dir, const struct ot_job_user *u,
				  const char *home_pattern, int dry,
				  int *pending, char *msg, size_t msglen)
{
	char pw_msg[1024] = "", gr_msg[1024] = "";
	enum ot_ensure pw, gr = OT_ENSURE_PRESENT;
	int named;

	*pending = 0;
	pw = ensure_passwd(dir, u, home_pattern, dry, pending, &named, pw_msg,
			   sizeof(pw_msg));
	if (named && u->gid == u->uid)
		gr = ensure_group(dir, u, dry, pending, gr_msg, sizeof(gr_msg));

	if (gr_msg[0] && (pw == OT_ENSURE_ADDED || gr != OT_ENSURE_PRESENT))
		snprintf(msg, msglen, "%s; %s", pw_msg, gr_msg);
	else
		snprintf(msg, msglen, "%s", pw_msg);
	if (pw == OT_ENSURE_ERROR || gr == OT_ENSURE_ERROR)
		return OT_ENSURE_ERROR;
	return pw == OT_ENSURE_ADDED || gr == OT_ENSURE_ADDED ?
	       OT_ENSURE_ADDED : OT_ENSURE_PRESENT;
}

enum ot_ensure ot_ensure_job_user(const char *etc_dir,
				  const struct ot_job_user *u,
				  const char *home_pattern, char *msg,
				  size_t msglen)
{
	enum ot_ensure rc;
	int pending, lock;

	/* Callers validated these; a line of passwd is no place to find out they did not. */
	if (!ot_user_name_valid(u->name) || u->uid == UINT32_MAX ||
	    u->gid == UINT32_MAX) {
		snprintf(msg, msglen, "refusing an invalid user name or id");
		return OT_ENSURE_ERROR;
	}
	/*
	 * A look without the lock first: every job after a user's first finds
	 * the entries in place, and writers replace the files whole, so reading
	 * unlocked is safe.  Only a write takes the lock (up to 15 s of waiting
	 * in lckpwdf), and decides again under it from what is there then.
	 */
	rc = ensure_both(etc_dir, u, home_pattern, 1, &pending, msg, msglen);
	if (!pending)
		return rc;
	lock = db_lock(etc_dir, msg, msglen);
	if (lock == -1)
		return OT_ENSURE_ERROR;
	rc = ensure_both(etc_dir, u, home_pattern, 0, &pending, msg, msglen);
	db_unlock(lock);
	return rc;
}
