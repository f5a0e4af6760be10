// The Secret Service through libsecret, loaded on first use. Written against libsecret's
// stable C ABI (secret-schema.h, secret-password.h), declared here so that building needs no
// libsecret headers and running needs libsecret only where the keyring is used. The
// password functions are variadic (attribute name, value, …, NULL), which Swift cannot call:
// this is why this target exists.

#define _GNU_SOURCE
#include "CSecretService.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    int type; // SECRET_SCHEMA_ATTRIBUTE_STRING = 0
} cv_schema_attribute;

// SecretSchema, as secret-schema.h lays it out.
typedef struct {
    const char *name;
    int flags; // SECRET_SCHEMA_NONE = 0
    cv_schema_attribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} cv_secret_schema;

// GError's public fields.
typedef struct {
    unsigned int domain;
    int code;
    char *message;
} cv_gerror;

typedef int (*store_fn)(const cv_secret_schema *, const char *collection, const char *label, const char *password,
                        void *cancellable, cv_gerror **error, ...);
typedef char *(*lookup_fn)(const cv_secret_schema *, void *cancellable, cv_gerror **error, ...);
typedef int (*clear_fn)(const cv_secret_schema *, void *cancellable, cv_gerror **error, ...);
typedef void (*password_free_fn)(char *);
typedef void (*error_free_fn)(cv_gerror *);
typedef void *(*search_fn)(const cv_secret_schema *, int flags, void *cancellable, cv_gerror **error, ...);
typedef void (*list_free_full_fn)(void *list, void (*free_item)(void *));
typedef void *(*cancellable_new_fn)(void);
typedef void (*cancellable_cancel_fn)(void *);
typedef void (*object_unref_fn)(void *);

static struct {
    int loaded; // 0 not tried, 1 loaded, -1 unavailable
    store_fn store;
    lookup_fn lookup;
    clear_fn clear;
    search_fn search;
    list_free_full_fn list_free_full;
    password_free_fn password_free;
    error_free_fn error_free;
    cancellable_new_fn cancellable_new;
    cancellable_cancel_fn cancellable_cancel;
    object_unref_fn object_unref;
} api;
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

static const cv_secret_schema schema = {
    "org.credentialvault.VaultKey",
    0,
    {{"application", 0}, {"vault", 0}, {NULL, 0}},
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

static int load(void) {
    pthread_mutex_lock(&api_lock);
    if (api.loaded == 0) {
        void *secret = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
        void *glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
        void *gobject = dlopen("libgobject-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
        void *gio = dlopen("libgio-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
        if (secret && glib && gobject && gio) {
            api.store = (store_fn)dlsym(secret, "secret_password_store_sync");
            api.lookup = (lookup_fn)dlsym(secret, "secret_password_lookup_sync");
            api.clear = (clear_fn)dlsym(secret, "secret_password_clear_sync");
            api.search = (search_fn)dlsym(secret, "secret_password_search_sync");
            api.list_free_full = (list_free_full_fn)dlsym(glib, "g_list_free_full");
            api.password_free = (password_free_fn)dlsym(secret, "secret_password_free");
            api.error_free = (error_free_fn)dlsym(glib, "g_error_free");
            api.cancellable_new = (cancellable_new_fn)dlsym(gio, "g_cancellable_new");
            api.cancellable_cancel = (cancellable_cancel_fn)dlsym(gio, "g_cancellable_cancel");
            api.object_unref = (object_unref_fn)dlsym(gobject, "g_object_unref");
        }
        int complete = api.store && api.lookup && api.clear && api.search && api.list_free_full && api.password_free && api.error_free && api.cancellable_new &&
                       api.cancellable_cancel && api.object_unref;
        api.loaded = complete ? 1 : -1;
        // The libraries stay loaded for the life of the process (GLib cannot be unloaded).
    }
    int loaded = api.loaded;
    pthread_mutex_unlock(&api_lock);
    return loaded == 1;
}

// A watchdog that cancels a call still running after its time.
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int finished;
    int fired;
    int timeout_ms;
    void *cancellable;
} watchdog;

static void *watch(void *argument) {
    watchdog *dog = argument;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += dog->timeout_ms / 1000;
    deadline.tv_nsec += (long)(dog->timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&dog->lock);
    while (!dog->finished) {
        if (pthread_cond_timedwait(&dog->done, &dog->lock, &deadline) == ETIMEDOUT) break;
    }
    if (!dog->finished) {
        dog->fired = 1;
        api.cancellable_cancel(dog->cancellable);
    }
    pthread_mutex_unlock(&dog->lock);
    return NULL;
}

static int start_watch(watchdog *dog, pthread_t *thread, int timeout_ms) {
    memset(dog, 0, sizeof *dog);
    pthread_mutex_init(&dog->lock, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&dog->done, &attributes);
    pthread_condattr_destroy(&attributes);
    dog->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    dog->cancellable = api.cancellable_new();
    int created = pthread_create(thread, NULL, watch, dog);
    if (created != 0) {
        api.object_unref(dog->cancellable);
        pthread_cond_destroy(&dog->done);
        pthread_mutex_destroy(&dog->lock);
    }
    return created;
}

static int stop_watch(watchdog *dog, pthread_t thread) {
    pthread_mutex_lock(&dog->lock);
    dog->finished = 1;
    pthread_cond_signal(&dog->done);
    pthread_mutex_unlock(&dog->lock);
    pthread_join(thread, NULL);
    int fired = dog->fired;
    api.object_unref(dog->cancellable);
    pthread_cond_destroy(&dog->done);
    pthread_mutex_destroy(&dog->lock);
    return fired;
}

static int failure(cv_gerror *error, int timed_out, char **message) {
    int code = timed_out ? CV_SECRET_TIMED_OUT : CV_SECRET_FAILED;
    if (message) *message = strdup(error && error->message ? error->message : (timed_out ? "timed out" : "failed"));
    if (error) api.error_free(error);
    return code;
}

int cv_secret_store(const char *vault_id, const char *label, const char *secret, int timeout_ms, char **message) {
    if (message) *message = NULL;
    if (!load()) return CV_SECRET_UNAVAILABLE;
    watchdog dog;
    pthread_t thread;
    if (start_watch(&dog, &thread, timeout_ms) != 0) return failure(NULL, 0, message);
    cv_gerror *error = NULL;
    int stored = api.store(&schema, NULL /* the default collection */, label, secret, dog.cancellable, &error, "application",
                           "credentialvault", "vault", vault_id, NULL);
    int fired = stop_watch(&dog, thread);
    if (!stored || error) return failure(error, fired, message);
    return CV_SECRET_OK;
}

int cv_secret_lookup(const char *vault_id, int timeout_ms, char **secret, char **message) {
    if (message) *message = NULL;
    *secret = NULL;
    if (!load()) return CV_SECRET_UNAVAILABLE;
    watchdog dog;
    pthread_t thread;
    if (start_watch(&dog, &thread, timeout_ms) != 0) return failure(NULL, 0, message);
    cv_gerror *error = NULL;
    char *found = api.lookup(&schema, dog.cancellable, &error, "application", "credentialvault", "vault", vault_id, NULL);
    int locked = 0;
    if (!found && !error) {
        // Nothing unlocked: an item that is there but locked (its prompt not shown or
        // dismissed) is told apart from no item. SECRET_SEARCH_ALL, no unlocking: locked items
        // match too. Under the same watchdog as the lookup.
        cv_gerror *search_error = NULL;
        void *items = api.search(&schema, 1 << 1, dog.cancellable, &search_error, "application", "credentialvault", "vault", vault_id, NULL);
        if (search_error) api.error_free(search_error);
        if (items) {
            api.list_free_full(items, api.object_unref);
            locked = 1;
        }
    }
    int fired = stop_watch(&dog, thread);
    if (error) {
        if (found) api.password_free(found);
        return failure(error, fired, message);
    }
    if (!found) {
        if (fired) return failure(NULL, 1, message);
        if (locked) {
            if (message) *message = strdup("the item is locked");
            return CV_SECRET_LOCKED;
        }
        return CV_SECRET_NOT_FOUND;
    }
    *secret = strdup(found);
    api.password_free(found); // wipes libsecret's copy
    return *secret ? CV_SECRET_OK : failure(NULL, 0, message);
}

int cv_secret_clear(const char *vault_id, int timeout_ms, char **message) {
    if (message) *message = NULL;
    if (!load()) return CV_SECRET_UNAVAILABLE;
    watchdog dog;
    pthread_t thread;
    if (start_watch(&dog, &thread, timeout_ms) != 0) return failure(NULL, 0, message);
    cv_gerror *error = NULL;
    int cleared = api.clear(&schema, dog.cancellable, &error, "application", "credentialvault", "vault", vault_id, NULL);
    int fired = stop_watch(&dog, thread);
    if (error) return failure(error, fired, message);
    return cleared ? CV_SECRET_OK : CV_SECRET_NOT_FOUND;
}

void cv_secret_free(char *secret) {
    if (!secret) return;
    explicit_bzero(secret, strlen(secret));
    free(secret);
}
