-- CredentialVault schema version 16: key slots (issue 36).
--
-- The header (vault_meta) keeps the vault's own credential as it always did: its passphrase's
-- salt and cost, or nothing for a key file, with the key check and the vault key wrapped under
-- the key-encryption key derived from it. That credential is slot 0 and stays the recovery route.
-- Each row here is one more way in: a key-encryption key of its own (a second passphrase, a key
-- file, a key a keeper holds: the desktop keyring, a systemd credential) seals the header's
-- derived secret (`wrapped_secret`, XChaCha20-Poly1305 under the slot's key, bound to the vault id
-- and the slot id), so the slot opens exactly what slot 0 opens. A key rotation re-wraps the vault
-- key under the same derived secret and leaves every slot as it is; `passwd` changes the derived
-- secret and re-seals it into every slot.
--
-- `kind` says how the slot's key is obtained ('argon2id13': a passphrase stretched with the
-- slot's own salt and cost; 'keyfile': 32 bytes, from a file or a keeper); `keeper` names who
-- holds a 'keyfile' slot's key ('secret-service', 'systemd-creds'; NULL: a key file, whose path
-- is `label`). Every row carries a MAC and the table is committed to as a collection (account ''),
-- so a slot edited, deleted or put back after its removal is caught when the vault is unlocked
-- through a slot and by `vault verify`. Ids are never reused (AUTOINCREMENT).
CREATE TABLE key_slots (
    slot_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT    NOT NULL CHECK (kind IN ('argon2id13', 'keyfile')),
    keeper         TEXT,
    label          TEXT    NOT NULL,
    kdf_salt       BLOB,
    kdf_opslimit   INTEGER,
    kdf_memlimit   INTEGER,
    wrapped_secret BLOB    NOT NULL,
    created_at     INTEGER NOT NULL,
    row_mac        BLOB,
    CHECK ((kind = 'keyfile') OR (kdf_salt IS NOT NULL AND kdf_opslimit IS NOT NULL AND kdf_memlimit IS NOT NULL)),
    CHECK ((kind = 'keyfile') OR (keeper IS NULL))
);
