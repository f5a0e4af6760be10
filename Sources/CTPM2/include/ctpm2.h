#ifndef CTPM2_H
#define CTPM2_H

#include <stddef.h>

/// A 32-byte key sealed to this machine's TPM 2.0 through tpm2-tss's ESAPI, loaded when first
/// used (`dlopen("libtss2-esys.so.0")`, as systemd loads tss2): a `vault` that never uses the
/// TPM needs no tpm2-tss installed, and starts without it. Building needs its headers only.
///
/// The key is a keyed-hash object under a primary storage key made afresh in the owner
/// hierarchy (ECC P-256, the same template each time, so the same TPM gives the same primary):
/// its private part is encrypted by the TPM and opens on no other TPM, nor on this one after its
/// owner hierarchy was cleared. Optionally its authorization needs a PIN (the TPM's
/// dictionary-attack protection counts wrong ones) and a PCR policy over SHA-256 PCRs (it opens
/// only while those PCRs hold the values they had when it was sealed). Every command that carries
/// the key runs in a session salted with the primary key, with the key encrypted on the bus.
///
/// The blob: "CVT2", a version byte (1), a flags byte (bit 0: a PIN is needed), the PCR mask
/// (4 bytes, big-endian, bit i = PCR i), then the primary key's TPM2B_NAME (pinned: unsealing
/// refuses another primary before anything is sent under it), the TPM2B_PUBLIC and the
/// TPM2B_PRIVATE, marshalled.
///
/// `tcti` configures the TPM connection (`device:/dev/tpmrm0`, `swtpm:path=…`); NULL takes the
/// kernel's devices only, /dev/tpmrm0 then /dev/tpm0 (never tpm2-tss's simulator fallbacks on
/// localhost ports, where any local user could answer).

enum {
    CV_TPM2_OK = 0,
    /// tpm2-tss (libtss2-esys, libtss2-tctildr, libtss2-mu) is not installed.
    CV_TPM2_UNAVAILABLE = 1,
    /// No TPM could be reached (no /dev/tpmrm0, or no access to it).
    CV_TPM2_NO_DEVICE = 2,
    /// The TPM refused or failed otherwise: the reason is in `message`.
    CV_TPM2_FAILED = 3,
    /// The PIN is wrong.
    CV_TPM2_BAD_PIN = 4,
    /// The TPM is in dictionary-attack lockout (too many wrong PINs): it refuses until it recovers.
    CV_TPM2_LOCKOUT = 5,
    /// The PCRs no longer hold the values the key was sealed to (an update, another boot path).
    CV_TPM2_PCRS_CHANGED = 6,
    /// The blob does not load here: another TPM, or this one's owner hierarchy was cleared.
    CV_TPM2_OTHER_TPM = 7,
    /// Not a blob this code wrote.
    CV_TPM2_MALFORMED = 8,
};

/// Seals `secret` (at most TPM2_MAX_SYM_DATA bytes; a PIN at most the SHA-256 digest's 32). On success `*blob` is a malloc'd blob of `*blob_len`
/// bytes (free it with `cv_tpm2_free`). `pin` may be NULL (no PIN). `message` (when not NULL)
/// receives a malloc'd reason on failure.
int cv_tpm2_seal(const char *tcti, const unsigned char *secret, size_t secret_len, const unsigned char *pin, size_t pin_len,
                 unsigned int pcr_mask, unsigned char **blob, size_t *blob_len, char **message);

/// Unseals `blob` into `secret`, which must be exactly as long as what was sealed.
int cv_tpm2_unseal(const char *tcti, const unsigned char *blob, size_t blob_len, const unsigned char *pin, size_t pin_len,
                   unsigned char *secret, size_t secret_len, char **message);

/// Whether `blob` says a PIN is needed (1), not (0), or is not a blob (-1).
int cv_tpm2_needs_pin(const unsigned char *blob, size_t blob_len);

/// Frees a blob `cv_tpm2_seal` returned.
void cv_tpm2_free(unsigned char *blob);

#endif
