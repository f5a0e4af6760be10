-- CredentialVault schema version 11: several accounts behind one credential-helper host
-- (issue 29). A host entry (`host[:port][/path]`, as `vault accounts set-host` keeps them in
-- credential_hosts) may now be bound to several accounts, told apart by the user name each
-- answers with (credential_username); a request without a user name gets the entry's default.
--
-- The entries of credential_hosts this account is the default for, space-separated (a subset
-- of its credential_hosts). NULL in existing rows (where each entry had one account, which
-- answers as before), and a NULL column does not enter a row's MAC, so rows authenticated by
-- schema 10 stay authentic; the account row's MAC covers it once set.
ALTER TABLE accounts ADD COLUMN credential_default_hosts TEXT;
