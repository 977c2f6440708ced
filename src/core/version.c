/* src/core/version.c: kiln_version, the running library's version. */
#include "core.h"

/* The library's KILN_VERSION_STRING (static). Never fails. */
const char *kiln_version(void) { return KILN_VERSION_STRING; }
