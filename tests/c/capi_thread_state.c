/*
 * A C thread whose only calls are those shim.c makes directly (phase 2, synchronize)
 * keeps one Python thread state for its life: shim.c gives it one through cffi before its
 * first direct call. Without that, each call would make and delete one, a crossing about
 * 25 times as long.
 *
 * Prints "kept" or "not kept" (libpython's own PyGILState_GetThisThreadState, in the
 * thread after its calls) and exits 0, or exits 1 if the runtime cannot be set up.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_l1_loss_backward.h"

typedef void *(*ThreadStateOf)(void);

static ThreadStateOf this_thread_state;

static void *direct_calls_only(void *kept)
{
    int i;
    for (i = 0; i < 3; i++) {
        (void)aclrtSynchronizeStream(NULL);
        (void)aclnnL1LossBackward(NULL, 0, NULL, NULL);
    }
    *(int *)kept = this_thread_state() != NULL;
    return NULL;
}

int main(void)
{
    pthread_t thread;
    int kept = 0;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    *(void **)&this_thread_state = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    if (this_thread_state == NULL || pthread_create(&thread, NULL, direct_calls_only, &kept) != 0 ||
        pthread_join(thread, NULL) != 0) {
        return 1;
    }
    puts(kept ? "kept" : "not kept");
    return 0;
}
