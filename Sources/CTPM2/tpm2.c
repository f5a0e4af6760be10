// A key sealed to the TPM through tpm2-tss's ESAPI, loaded with dlopen (see ctpm2.h). The
// headers give the types and prototypes; nothing links the libraries.
#include "ctpm2.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_tctildr.h>

static struct {
    int loaded; // 0 not tried, 1 loaded, -1 unavailable
    __typeof__(Tss2_TctiLdr_Initialize) *tcti_initialize;
    __typeof__(Tss2_TctiLdr_Finalize) *tcti_finalize;
    __typeof__(Esys_Initialize) *initialize;
    __typeof__(Esys_Finalize) *finalize;
    __typeof__(Esys_Startup) *startup;
    __typeof__(Esys_CreatePrimary) *create_primary;
    __typeof__(Esys_Create) *create;
    __typeof__(Esys_Load) *load;
    __typeof__(Esys_Unseal) *unseal;
    __typeof__(Esys_StartAuthSession) *start_session;
    __typeof__(Esys_TRSess_SetAttributes) *session_attributes;
    __typeof__(Esys_PolicyPCR) *policy_pcr;
    __typeof__(Esys_PolicyAuthValue) *policy_auth_value;
    __typeof__(Esys_PolicyGetDigest) *policy_digest;
    __typeof__(Esys_FlushContext) *flush;
    __typeof__(Esys_TR_SetAuth) *set_auth;
    __typeof__(Esys_TR_GetName) *get_name;
    __typeof__(Esys_Free) *esys_free;
    __typeof__(Tss2_MU_TPM2B_PUBLIC_Marshal) *public_marshal;
    __typeof__(Tss2_MU_TPM2B_PUBLIC_Unmarshal) *public_unmarshal;
    __typeof__(Tss2_MU_TPM2B_PRIVATE_Marshal) *private_marshal;
    __typeof__(Tss2_MU_TPM2B_PRIVATE_Unmarshal) *private_unmarshal;
    __typeof__(Tss2_MU_TPM2B_NAME_Marshal) *name_marshal;
    __typeof__(Tss2_MU_TPM2B_NAME_Unmarshal) *name_unmarshal;
} api;
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

static int load_api(void) {
    pthread_mutex_lock(&api_lock);
    if (api.loaded == 0) {
        void *esys = dlopen("libtss2-esys.so.0", RTLD_NOW | RTLD_LOCAL);
        void *tctildr = dlopen("libtss2-tctildr.so.0", RTLD_NOW | RTLD_LOCAL);
        void *mu = dlopen("libtss2-mu.so.0", RTLD_NOW | RTLD_LOCAL);
        api.loaded = -1;
        if (esys && tctildr && mu) {
#define FIND(field, library, name) api.field = (__typeof__(api.field))dlsym(library, name)
            FIND(tcti_initialize, tctildr, "Tss2_TctiLdr_Initialize");
            FIND(tcti_finalize, tctildr, "Tss2_TctiLdr_Finalize");
            FIND(initialize, esys, "Esys_Initialize");
            FIND(finalize, esys, "Esys_Finalize");
            FIND(startup, esys, "Esys_Startup");
            FIND(create_primary, esys, "Esys_CreatePrimary");
            FIND(create, esys, "Esys_Create");
            FIND(load, esys, "Esys_Load");
            FIND(unseal, esys, "Esys_Unseal");
            FIND(start_session, esys, "Esys_StartAuthSession");
            FIND(session_attributes, esys, "Esys_TRSess_SetAttributes");
            FIND(policy_pcr, esys, "Esys_PolicyPCR");
            FIND(policy_auth_value, esys, "Esys_PolicyAuthValue");
            FIND(policy_digest, esys, "Esys_PolicyGetDigest");
            FIND(flush, esys, "Esys_FlushContext");
            FIND(set_auth, esys, "Esys_TR_SetAuth");
            FIND(get_name, esys, "Esys_TR_GetName");
            FIND(esys_free, esys, "Esys_Free");
            FIND(public_marshal, mu, "Tss2_MU_TPM2B_PUBLIC_Marshal");
            FIND(public_unmarshal, mu, "Tss2_MU_TPM2B_PUBLIC_Unmarshal");
            FIND(private_marshal, mu, "Tss2_MU_TPM2B_PRIVATE_Marshal");
            FIND(private_unmarshal, mu, "Tss2_MU_TPM2B_PRIVATE_Unmarshal");
            FIND(name_marshal, mu, "Tss2_MU_TPM2B_NAME_Marshal");
            FIND(name_unmarshal, mu, "Tss2_MU_TPM2B_NAME_Unmarshal");
#undef FIND
            if (api.tcti_initialize && api.tcti_finalize && api.initialize && api.finalize && api.startup && api.create_primary &&
                api.create && api.load && api.unseal && api.start_session && api.session_attributes && api.policy_pcr &&
                api.policy_auth_value && api.policy_digest && api.flush && api.set_auth && api.get_name && api.esys_free && api.public_marshal &&
                api.public_unmarshal && api.private_marshal && api.private_unmarshal && api.name_marshal && api.name_unmarshal) {
                api.loaded = 1;
            }
        }
        // The libraries stay loaded for the process's life once found (their state is global).
        if (api.loaded != 1) {
            if (esys) dlclose(esys);
            if (tctildr) dlclose(tctildr);
            if (mu) dlclose(mu);
        }
    }
    int loaded = api.loaded;
    pthread_mutex_unlock(&api_lock);
    return loaded == 1;
}

static void say(char **message, const char *format, ...) {
    if (!message) return;
    va_list arguments;
    va_start(arguments, format);
    char buffer[512];
    vsnprintf(buffer, sizeof buffer, format, arguments);
    va_end(arguments);
    *message = strdup(buffer);
}

/// The TPM's response code without its layer, parameter, handle or session number.
static TSS2_RC base_code(TSS2_RC rc) {
    rc &= 0xFFFF;
    if (rc & TPM2_RC_FMT1) return rc & (TPM2_RC_FMT1 | 0x3F);
    return rc;
}

/// What a failed TPM call means to the caller. Only the calls that present the sealed key's
/// own authorization (`with_pin`: the unseal) can fail for its PIN or its PCR policy; an
/// authorization failure anywhere else is the owner hierarchy's password, which this code never
/// gives.
static int classify(TSS2_RC rc, const char *doing, int with_pin, char **message) {
    TSS2_RC code = base_code(rc);
    if (code == TPM2_RC_LOCKOUT) {
        say(message, "the TPM is in dictionary-attack lockout after too many wrong PINs (while %s)", doing);
        return CV_TPM2_LOCKOUT;
    }
    if (code == TPM2_RC_AUTH_FAIL || code == TPM2_RC_BAD_AUTH) {
        if (!with_pin) {
            say(message, "the TPM refused an authorization while %s: its owner hierarchy has a password, which vault does not use", doing);
            return CV_TPM2_FAILED;
        }
        say(message, "the TPM refused the PIN (while %s)", doing);
        return CV_TPM2_BAD_PIN;
    }
    if (with_pin && code == TPM2_RC_POLICY_FAIL) {
        say(message, "the PCRs no longer hold the values the key was sealed to (while %s)", doing);
        return CV_TPM2_PCRS_CHANGED;
    }
    say(message, "the TPM failed while %s (response code 0x%x)", doing, (unsigned)rc);
    return CV_TPM2_FAILED;
}

/// A TPM connection and its ESAPI context.
typedef struct {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
    ESYS_TR primary;
    ESYS_TR session;
    ESYS_TR object;
} connection;

static void disconnect(connection *c) {
    if (c->esys) {
        if (c->object != ESYS_TR_NONE) api.flush(c->esys, c->object);
        if (c->session != ESYS_TR_NONE) api.flush(c->esys, c->session);
        if (c->primary != ESYS_TR_NONE) api.flush(c->esys, c->primary);
        api.finalize(&c->esys);
    }
    if (c->tcti) api.tcti_finalize(&c->tcti);
}

/// Connects, starts the TPM if nothing did (a simulator), and makes the primary storage key.
static int connect_tpm(const char *tcti, connection *c, char **message) {
    c->tcti = NULL;
    c->esys = NULL;
    c->primary = c->session = c->object = ESYS_TR_NONE;
    if (!load_api()) {
        say(message, "tpm2-tss is not installed");
        return CV_TPM2_UNAVAILABLE;
    }
    // Without a configuration, the kernel's devices only: tpm2-tss's own default would go on
    // to the simulators' TCP ports on localhost, where any local user could answer as the TPM.
    TSS2_RC rc = api.tcti_initialize(tcti ? tcti : "device:/dev/tpmrm0", &c->tcti);
    if (rc != TSS2_RC_SUCCESS && !tcti) rc = api.tcti_initialize("device:/dev/tpm0", &c->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        say(message, "cannot reach the TPM through %s", tcti ? tcti : "/dev/tpmrm0 or /dev/tpm0");
        return CV_TPM2_NO_DEVICE;
    }
    rc = api.initialize(&c->esys, c->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        disconnect(c);
        say(message, "cannot start a TPM session context (0x%x)", (unsigned)rc);
        return CV_TPM2_FAILED;
    }
    rc = api.startup(c->esys, TPM2_SU_CLEAR);
    if (rc != TSS2_RC_SUCCESS && base_code(rc) != TPM2_RC_INITIALIZE) {
        disconnect(c);
        return classify(rc, "starting it", 0, message);
    }
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_ECC,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA,
            .parameters.eccDetail = {
                .symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB},
                .scheme = {.scheme = TPM2_ALG_NULL},
                .curveID = TPM2_ECC_NIST_P256,
                .kdf = {.scheme = TPM2_ALG_NULL},
            },
        },
    };
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION none = {0};
    rc = api.create_primary(c->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template,
                            &outside, &none, &c->primary, NULL, NULL, NULL, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        int status = classify(rc, "making its primary key", 0, message);
        disconnect(c);
        return status;
    }
    return CV_TPM2_OK;
}

/// Starts a session of `type` salted with the primary key, whose commands and responses carry
/// their first parameter encrypted (AES-128-CFB): the key never crosses the bus in the clear.
static int start_session(connection *c, TPM2_SE type, ESYS_TR *session, char **message) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB};
    TSS2_RC rc = api.start_session(c->esys, c->primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL, type,
                                   &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return classify(rc, "starting a session", 0, message);
    if (type != TPM2_SE_TRIAL) {
        TPMA_SESSION attributes = TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION;
        rc = api.session_attributes(c->esys, *session, attributes, 0xFF);
        if (rc != TSS2_RC_SUCCESS) return classify(rc, "setting up a session", 0, message);
    }
    return CV_TPM2_OK;
}

/// The SHA-256 PCR selection of `mask`.
static TPML_PCR_SELECTION selection(unsigned int mask) {
    TPML_PCR_SELECTION pcrs = {.count = 1};
    pcrs.pcrSelections[0].hash = TPM2_ALG_SHA256;
    pcrs.pcrSelections[0].sizeofSelect = 3;
    pcrs.pcrSelections[0].pcrSelect[0] = mask & 0xFF;
    pcrs.pcrSelections[0].pcrSelect[1] = (mask >> 8) & 0xFF;
    pcrs.pcrSelections[0].pcrSelect[2] = (mask >> 16) & 0xFF;
    return pcrs;
}

/// Runs the policy (PCRs, then the PIN) in `session`.
static int run_policy(connection *c, ESYS_TR session, unsigned int mask, int pin, char **message) {
    TPM2B_DIGEST current = {0}; // empty: the TPM takes the PCRs' current values
    TPML_PCR_SELECTION pcrs = selection(mask);
    TSS2_RC rc = api.policy_pcr(c->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &current, &pcrs);
    if (rc != TSS2_RC_SUCCESS) return classify(rc, "reading the PCRs", 0, message);
    if (pin) {
        rc = api.policy_auth_value(c->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
        if (rc != TSS2_RC_SUCCESS) return classify(rc, "adding the PIN to the policy", 0, message);
    }
    return CV_TPM2_OK;
}

static const unsigned char magic[4] = {'C', 'V', 'T', '2'};
enum { header_length = 10 };

int cv_tpm2_seal(const char *tcti, const unsigned char *secret, size_t secret_len, const unsigned char *pin, size_t pin_len,
                 unsigned int pcr_mask, unsigned char **blob, size_t *blob_len, char **message) {
    *blob = NULL;
    *blob_len = 0;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    if (secret_len == 0 || secret_len > sizeof sensitive.sensitive.data.buffer || pin_len > 32 ||
        pcr_mask > 0xFFFFFF) {
        say(message, "nothing to seal, too much, or a PIN or PCR set out of range");
        return CV_TPM2_FAILED;
    }
    connection c;
    int status = connect_tpm(tcti, &c, message);
    if (status != CV_TPM2_OK) return status;
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_KEYEDHASH,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | (pcr_mask ? 0 : TPMA_OBJECT_USERWITHAUTH),
            .parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL,
        },
    };
    if (pcr_mask) {
        ESYS_TR trial = ESYS_TR_NONE;
        TPMT_SYM_DEF none = {.algorithm = TPM2_ALG_NULL};
        TSS2_RC rc = api.start_session(c.esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                       TPM2_SE_TRIAL, &none, TPM2_ALG_SHA256, &trial);
        if (rc != TSS2_RC_SUCCESS) {
            status = classify(rc, "starting a trial policy", 0, message);
            disconnect(&c);
            return status;
        }
        status = run_policy(&c, trial, pcr_mask, pin_len > 0, message);
        TPM2B_DIGEST *digest = NULL;
        if (status == CV_TPM2_OK) {
            rc = api.policy_digest(c.esys, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
            if (rc != TSS2_RC_SUCCESS) status = classify(rc, "computing the policy", 0, message);
        }
        api.flush(c.esys, trial);
        if (status != CV_TPM2_OK) {
            disconnect(&c);
            return status;
        }
        template.publicArea.authPolicy = *digest;
        api.esys_free(digest);
    }
    status = start_session(&c, TPM2_SE_HMAC, &c.session, message);
    if (status != CV_TPM2_OK) {
        disconnect(&c);
        return status;
    }
    memcpy(sensitive.sensitive.data.buffer, secret, secret_len);
    sensitive.sensitive.data.size = (UINT16)secret_len;
    if (pin_len) {
        memcpy(sensitive.sensitive.userAuth.buffer, pin, pin_len);
        sensitive.sensitive.userAuth.size = (UINT16)pin_len;
    }
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION none = {0};
    TPM2B_PRIVATE *private = NULL;
    TPM2B_PUBLIC *public = NULL;
    TSS2_RC rc = api.create(c.esys, c.primary, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outside, &none, &private,
                            &public, NULL, NULL, NULL);
    explicit_bzero(&sensitive, sizeof sensitive);
    if (rc != TSS2_RC_SUCCESS) {
        status = classify(rc, "sealing the key", 0, message);
        disconnect(&c);
        return status;
    }
    // The primary key's name, pinned: unsealing checks it before the key is sent for.
    TPM2B_NAME *primary_name = NULL;
    rc = api.get_name(c.esys, c.primary, &primary_name);
    if (rc != TSS2_RC_SUCCESS) {
        api.esys_free(private);
        api.esys_free(public);
        status = classify(rc, "naming its primary key", 0, message);
        disconnect(&c);
        return status;
    }
    // Header, then the three structures marshalled (each at most its own size).
    size_t capacity = header_length + sizeof(TPM2B_NAME) + sizeof(TPM2B_PUBLIC) + sizeof(TPM2B_PRIVATE);
    unsigned char *out = malloc(capacity);
    size_t offset = header_length;
    if (out) {
        memcpy(out, magic, 4);
        out[4] = 1;
        out[5] = pin_len ? 1 : 0;
        out[6] = (unsigned char)(pcr_mask >> 24);
        out[7] = (unsigned char)(pcr_mask >> 16);
        out[8] = (unsigned char)(pcr_mask >> 8);
        out[9] = (unsigned char)pcr_mask;
        if (api.name_marshal(primary_name, out, capacity, &offset) != TSS2_RC_SUCCESS ||
            api.public_marshal(public, out, capacity, &offset) != TSS2_RC_SUCCESS ||
            api.private_marshal(private, out, capacity, &offset) != TSS2_RC_SUCCESS) {
            free(out);
            out = NULL;
        }
    }
    api.esys_free(primary_name);
    api.esys_free(private);
    api.esys_free(public);
    disconnect(&c);
    if (!out) {
        say(message, "cannot write the sealed key");
        return CV_TPM2_FAILED;
    }
    *blob = out;
    *blob_len = offset;
    return CV_TPM2_OK;
}

/// Reads the blob's header and structures.
static int parse(const unsigned char *blob, size_t blob_len, int *pin, unsigned int *mask, TPM2B_NAME *name, TPM2B_PUBLIC *public,
                 TPM2B_PRIVATE *private) {
    if (blob_len < header_length || memcmp(blob, magic, 4) != 0 || blob[4] != 1 || blob[5] > 1) return 0;
    *pin = blob[5];
    *mask = ((unsigned int)blob[6] << 24) | ((unsigned int)blob[7] << 16) | ((unsigned int)blob[8] << 8) | blob[9];
    if (*mask > 0xFFFFFF || !public) return *mask <= 0xFFFFFF;
    size_t offset = header_length;
    if (api.name_unmarshal(blob, blob_len, &offset, name) != TSS2_RC_SUCCESS) return 0;
    if (api.public_unmarshal(blob, blob_len, &offset, public) != TSS2_RC_SUCCESS) return 0;
    if (api.private_unmarshal(blob, blob_len, &offset, private) != TSS2_RC_SUCCESS) return 0;
    return offset == blob_len;
}

int cv_tpm2_needs_pin(const unsigned char *blob, size_t blob_len) {
    int pin = 0;
    unsigned int mask = 0;
    return parse(blob, blob_len, &pin, &mask, NULL, NULL, NULL) ? pin : -1;
}

int cv_tpm2_unseal(const char *tcti, const unsigned char *blob, size_t blob_len, const unsigned char *pin, size_t pin_len,
                   unsigned char *secret, size_t secret_len, char **message) {
    if (!load_api()) {
        say(message, "tpm2-tss is not installed");
        return CV_TPM2_UNAVAILABLE;
    }
    int needs_pin = 0;
    unsigned int mask = 0;
    TPM2B_NAME sealed_under = {0};
    TPM2B_PUBLIC public = {0};
    TPM2B_PRIVATE private = {0};
    if (!parse(blob, blob_len, &needs_pin, &mask, &sealed_under, &public, &private)) {
        say(message, "not a key sealed by this program");
        return CV_TPM2_MALFORMED;
    }
    TPM2B_AUTH auth = {0};
    if (pin_len > 32) {
        say(message, "the PIN is too long");
        return CV_TPM2_BAD_PIN;
    }
    connection c;
    int status = connect_tpm(tcti, &c, message);
    if (status != CV_TPM2_OK) return status;
    // The primary key the session will be salted with must be the one the key was sealed under:
    // anything else is another TPM (or its owner hierarchy was cleared), or something between
    // this process and the TPM, which is sent nothing.
    TPM2B_NAME *primary_name = NULL;
    TSS2_RC rc = api.get_name(c.esys, c.primary, &primary_name);
    if (rc != TSS2_RC_SUCCESS) {
        status = classify(rc, "naming its primary key", 0, message);
        disconnect(&c);
        return status;
    }
    int same = primary_name->size == sealed_under.size && memcmp(primary_name->name, sealed_under.name, sealed_under.size) == 0;
    api.esys_free(primary_name);
    if (!same) {
        say(message, "the sealed key does not belong to this TPM: it was sealed by another TPM, this one's owner hierarchy was cleared, or something stands between vault and the TPM");
        disconnect(&c);
        return CV_TPM2_OTHER_TPM;
    }
    rc = api.load(c.esys, c.primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &private, &public, &c.object);
    if (rc != TSS2_RC_SUCCESS) {
        TSS2_RC code = base_code(rc);
        if (code == TPM2_RC_INTEGRITY || code == TPM2_RC_SIZE || code == TPM2_RC_VALUE || code == TPM2_RC_KEY) {
            say(message, "the sealed key does not load on this TPM: it was sealed by another TPM, or the file was changed");
            status = CV_TPM2_OTHER_TPM;
        } else {
            status = classify(rc, "loading the sealed key", 0, message);
        }
        disconnect(&c);
        return status;
    }
    if (pin_len) {
        memcpy(auth.buffer, pin, pin_len);
        auth.size = (UINT16)pin_len;
        rc = api.set_auth(c.esys, c.object, &auth);
        explicit_bzero(&auth, sizeof auth);
        if (rc != TSS2_RC_SUCCESS) {
            disconnect(&c);
            return classify(rc, "giving the PIN", 0, message);
        }
    }
    TPM2B_SENSITIVE_DATA *data = NULL;
    // A PCR extended between the policy and the unseal (TPM2_RC_PCR_CHANGED) is tried once more.
    for (int attempt = 0; attempt < 2; attempt++) {
        status = start_session(&c, mask ? TPM2_SE_POLICY : TPM2_SE_HMAC, &c.session, message);
        if (status == CV_TPM2_OK && mask) status = run_policy(&c, c.session, mask, needs_pin, message);
        if (status != CV_TPM2_OK) {
            disconnect(&c);
            return status;
        }
        rc = api.unseal(c.esys, c.object, c.session, ESYS_TR_NONE, ESYS_TR_NONE, &data);
        if (base_code(rc) != TPM2_RC_PCR_CHANGED) break;
        api.flush(c.esys, c.session);
        c.session = ESYS_TR_NONE;
    }
    if (rc != TSS2_RC_SUCCESS) {
        status = classify(rc, "unsealing the key", 1, message);
        disconnect(&c);
        return status;
    }
    if (data->size != secret_len) {
        say(message, "the TPM unsealed %u bytes where %zu were expected", (unsigned)data->size, secret_len);
        status = CV_TPM2_MALFORMED;
    } else {
        memcpy(secret, data->buffer, secret_len);
    }
    explicit_bzero(data, sizeof *data);
    api.esys_free(data);
    disconnect(&c);
    return status;
}

void cv_tpm2_free(unsigned char *blob) { free(blob); }
