/* The sync daemon's C tests' assertion: counts checks and failures, prints each
 * failure with its file, line and message, and goes on. */
#ifndef OVERTIME_SYNC_TEST_CHECK_H
#define OVERTIME_SYNC_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...) do {						\
	checks++;							\
	if (!(cond)) {							\
		failures++;						\
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);	\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
	}								\
} while (0)

#endif
