#ifndef OVERTIME_TEST_STUBS_H
#define OVERTIME_TEST_STUBS_H

#include <slurm/spank.h>

#include <stdint.h>
#include <sys/types.h>

extern char test_last_log[1024];
extern char test_log[8192];
extern spank_context_t test_context;
extern uint32_t test_jobid;
extern uid_t test_uid;
extern gid_t test_gid;
extern gid_t *test_gids;
extern int test_ngids;

void test_log_reset(void);
extern struct spank_option test_registered_option;
extern int test_registered_count;

#endif
