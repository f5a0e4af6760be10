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

/// The uid and pid of the process at the other end of a connected Unix-domain socket
/// (`getsockopt(SO_PEERCRED)`, filled by the kernel at connect time, so a client cannot lie).
/// Returns 0, or -1 with errno set. `struct ucred` needs _GNU_SOURCE, which Swift's Glibc
/// module does not define: this is why it is here.
int cv_peer_credentials(int fd, unsigned int *uid, int *pid);

/// Installs a handler for each of `signals` that forwards it to the process set with
/// `cv_set_forward_target`; one that arrives before a target is set is kept and forwarded when
/// it is. A handler, not SIG_IGN: a child started afterwards begins with default dispositions
/// (exec resets handlers but keeps ignored signals ignored). Returns 0 or -1 with errno.
int cv_forward_signals(const int *signals, int count);

/// Sets where forwarded signals go, and forwards those that arrived before, each once. Safe
/// against a handler running at the same moment on another thread: a signal that arrives while
/// the target is being set is forwarded exactly once, by the handler or by this call. A `pid`
/// of 0 or less goes back to keeping signals until a target is set again.
void cv_set_forward_target(int pid);

/// Opens the directory `path` (relative to `dirfd`, or `AT_FDCWD`) as a handle that only names
/// it: `O_PATH | O_DIRECTORY | O_CLOEXEC`, plus `O_NOFOLLOW` when `nofollow` is non-zero (the
/// last component may not be a symbolic link). The descriptor, or -1 with errno set. O_PATH
/// needs _GNU_SOURCE, which Swift's Glibc module does not define: this is why it is here.
int cv_open_directory(int dirfd, const char *path, int nofollow);

/// Whether the open file `fd` carries a POSIX access ACL (`system.posix_acl_access`): 1, 0,
/// or -1 with errno set for another failure. sys/xattr.h is not in Swift's Glibc module.
int cv_has_access_acl(int fd);

/// Whether `path` lies on a memory file system (tmpfs or ramfs): 1, 0, or -1 with errno set.
/// sys/vfs.h (statfs and its f_type) is not in Swift's Glibc module.
int cv_is_memory_file_system(const char *path);

#endif
