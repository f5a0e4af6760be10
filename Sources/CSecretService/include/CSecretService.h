#ifndef CSECRETSERVICE_H
#define CSECRETSERVICE_H

#include <stddef.h>

/// The desktop keyring over the Secret Service API, through libsecret loaded when first used
/// (`dlopen("libsecret-1.so.0")`, as systemd loads tss2): a `vault` that never uses the keyring
/// needs neither libsecret nor GLib installed, and starts without them.
///
/// Items carry the schema `org.credentialvault.VaultKey` with the attributes `application`
/// (`credentialvault`) and `vault` (the vault's id). Every call waits at most `timeout_ms` (a
/// locked keyring's unlock prompt included): past it the call is cancelled (GCancellable) and
/// fails with `CV_SECRET_TIMED_OUT`.

/// What a call ended with.
enum {
    CV_SECRET_OK = 0,
    /// No item for this vault (lookup, clear).
    CV_SECRET_NOT_FOUND = 1,
    /// libsecret (or GLib) is not installed: the keyring cannot be used from this machine.
    CV_SECRET_UNAVAILABLE = 2,
    /// The Secret Service answered with an error (no session bus, no keyring daemon, a
    /// dismissed prompt…): its message is in `message`.
    CV_SECRET_FAILED = 3,
    /// Cancelled after `timeout_ms` (a prompt nobody answered).
    CV_SECRET_TIMED_OUT = 4,
    /// The item is there but locked, and the keyring's unlock prompt could not be shown or was
    /// dismissed (lookup).
    CV_SECRET_LOCKED = 5,
};

/// Stores `secret` (text) for `vault_id` in the default collection under `label`, replacing
/// an item already there. `message` (when not NULL) receives a malloc'd reason on failure.
int cv_secret_store(const char *vault_id, const char *label, const char *secret, int timeout_ms, char **message);

/// Looks up the secret of `vault_id`: on success `*secret` is a malloc'd copy (the caller wipes
/// and frees it with `cv_secret_free`); libsecret's own copy is wiped as it is freed.
int cv_secret_lookup(const char *vault_id, int timeout_ms, char **secret, char **message);

/// Removes the item of `vault_id`.
int cv_secret_clear(const char *vault_id, int timeout_ms, char **message);

/// Wipes and frees a string `cv_secret_lookup` returned.
void cv_secret_free(char *secret);

#endif
