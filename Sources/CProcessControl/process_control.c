#define _GNU_SOURCE
#include "CProcessControl.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>

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

static volatile sig_atomic_t cv_forward_target = 0;
static volatile sig_atomic_t cv_pending[NSIG];

static void cv_forward(int signo) {
    int saved = errno;
    pid_t target = (pid_t)cv_forward_target;
    if (target > 0) {
        kill(target, signo);
    } else if (signo > 0 && signo < NSIG) {
        cv_pending[signo] = 1;
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
    cv_forward_target = pid;
    for (int signo = 1; signo < NSIG; signo++) {
        if (cv_pending[signo]) {
            cv_pending[signo] = 0;
            kill(pid, signo);
        }
    }
}
