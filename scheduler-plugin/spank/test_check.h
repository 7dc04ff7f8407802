/* Minimal assertion helpers shared by the C tests. */
#ifndef OVERTIME_TEST_CHECK_H
#define OVERTIME_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int test_failures;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__,       \
				__LINE__, #cond);                            \
			test_failures++;                                     \
		}                                                            \
	} while (0)

#define CHECK_STR(got, want)                                                 \
	do {                                                                 \
		const char *g_ = (got), *w_ = (want);                        \
		if (strcmp(g_, w_) != 0) {                                   \
			fprintf(stderr, "%s:%d: FAIL: %s is \"%s\", want \"%s\"\n", \
				__FILE__, __LINE__, #got, g_, w_);           \
			test_failures++;                                     \
		}                                                            \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                          \
	do {                                                                 \
		const char *h_ = (hay), *n_ = (needle);                      \
		if (!strstr(h_, n_)) {                                       \
			fprintf(stderr, "%s:%d: FAIL: \"%s\" lacks \"%s\"\n", \
				__FILE__, __LINE__, h_, n_);                 \
			test_failures++;                                     \
		}                                                            \
	} while (0)

#endif
