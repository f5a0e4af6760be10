#ifndef CPROCESSCONTROL_H
#define CPROCESSCONTROL_H

#include <stddef.h>

/// Makes the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`) and sets its core size limit
/// to 0. A non-dumpable process writes no core file, cannot be attached to with ptrace by
/// another process of the same user, and its /proc/PID/{mem,environ,…} belong to root.
/// Returns 0, or -1 with errno set by the first call that failed. prctl is variadic, which
/// Swift cannot call: this is why this target exists.
int cv_disable_core_dumps(void);

/// Overwrites `count` bytes at `bytes` with zeroes in a way the compiler cannot drop
/// (`explicit_bzero`).
void cv_wipe(void *bytes, size_t count);

#endif
