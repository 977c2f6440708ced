/* src/core/sanitizer.h: CORE_ASAN, defined when AddressSanitizer
 * instruments this build: gcc (and clang >= 15) say so with
 * __SANITIZE_ADDRESS__, clang 14 (Debian 12's, which make fuzz uses) only
 * with __has_feature(address_sanitizer). The allocator's free lists
 * (alloc.c, cache.c) step aside then, so that ASan sees every free: a
 * block kept on a list and handed out again hides a use after free, and
 * a freed block keeps its old contents, so LeakSanitizer takes what it
 * pointed to as reachable until the block is reused (the fuzz builds'
 * leak reports named a later input than the one that leaked). */
#ifndef KILN_CORE_SANITIZER_H
#define KILN_CORE_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define CORE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORE_ASAN 1
#endif
#endif

#endif
