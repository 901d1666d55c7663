/* version.c — what this build is; COLI_VERSION and COLI_BUILD_FLAGS come from the build. */
#include "../include/colibri.h"

#ifndef COLI_VERSION
#define COLI_VERSION "0.0.0-dev"
#endif
#ifndef COLI_BUILD_FLAGS
#define COLI_BUILD_FLAGS "unknown"
#endif

const char *colibri_version(void) { return COLI_VERSION; }

const char *colibri_build_info(void) { return COLI_BUILD_FLAGS; }
