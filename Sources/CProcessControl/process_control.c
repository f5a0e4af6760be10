#define _GNU_SOURCE
#include "CProcessControl.h"

#include <sys/xattr.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdatomic.h>

int cv_disable_core_dumps(void) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        return -1;
    }
    // Also for a kernel whose fs.suid_dumpable (2) still writes cores of non-dumpable processes.
    struct rlimit none = { 0, 0 };
    return setrlimit(RLIMIT_CORE, &none);
}

void cv_wipe(void *bytes, size_t count) {
    explicit_bzero(bytes, count);
}

int cv_peer_credentials(int fd, unsigned int *uid, int *pid) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
        return -1;
    }
    *uid = credentials.uid;
    *pid = credentials.pid;
    return 0;
}

int cv_open_directory(int dirfd, const char *path, int nofollow) {
    int flags = O_PATH | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0);
    int fd;
    do {
        fd = openat(dirfd, path, flags);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

// Shared by `vault exec`'s thread (which sets the target) and the signal handler, which the
// kernel may run on any thread of the process at any time: C11 atomics (lock-free for int on
// every platform Swift supports, so async-signal-safe), not `volatile sig_atomic_t`, which
// orders accesses only within one thread. Sequentially consistent throughout: the argument
// below needs one total order of the target's store and the pending flags' stores.
static atomic_int cv_forward_target = 0;
static atomic_int cv_pending[NSIG];

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler needs lock-free atomics");

static void cv_forward(int signo) {
    int saved = errno;
    int target = atomic_load(&cv_forward_target);
    if (target > 0) {
        kill((pid_t)target, signo);
    } else if (signo > 0 && signo < NSIG) {
        // No target yet: keep the signal. If the target was set between the load above and
        // this store, the setter may already have drained the flags; look again and deliver
        // it here. The exchange makes exactly one of the two (this handler or the setter's
        // drain) send it.
        atomic_store(&cv_pending[signo], 1);
        target = atomic_load(&cv_forward_target);
        if (target > 0 && atomic_exchange(&cv_pending[signo], 0)) {
            kill((pid_t)target, signo);
        }
    }
    errno = saved;
}

int cv_forward_signals(const int *signals, int count) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = cv_forward;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (int index = 0; index < count; index++) {
        if (sigaction(signals[index], &action, NULL) != 0) {
            return -1;
        }
    }
    return 0;
}

void cv_set_forward_target(int pid) {
    // Store first, then drain: a handler that stored its flag before this store is seen by the
    // drain; one that stores after it sees the target on its second load (one total order).
    atomic_store(&cv_forward_target, pid);
    if (pid <= 0) {
        return;  // back to keeping signals (kill(0, …) would signal the whole process group)
    }
    for (int signo = 1; signo < NSIG; signo++) {
        if (atomic_exchange(&cv_pending[signo], 0)) {
            kill((pid_t)pid, signo);
        }
    }
}

int cv_has_access_acl(int fd) {
    if (fgetxattr(fd, "system.posix_acl_access", NULL, 0) >= 0) return 1;
    return (errno == ENODATA || errno == ENOTSUP) ? 0 : -1;
}

int cv_is_memory_file_system(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (info.f_type == TMPFS_MAGIC || info.f_type == RAMFS_MAGIC) ? 1 : 0;
}
