#define _GNU_SOURCE
#include "CProcessControl.h"

#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

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
