-- API keys: bearer tokens with a role. Only the SHA-256 of a token is kept;
-- the token itself is shown once, when the key is created. A token is 32
-- random bytes, so its hash cannot be reversed by guessing and needs no
-- slow, salted hash (bcrypt would cost every request tens of milliseconds
-- for no gain). The prefix is the token's first characters, safe to show
-- in listings so that a person can tell which key a leaked token is.
-- A key is never deleted: revoked_at ends it and keeps its name taken, so
-- history rows that name the key always mean the same key.
CREATE TABLE api_keys (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name         VARCHAR(64)     NOT NULL,
    role         VARCHAR(16)     NOT NULL COMMENT 'submit, read, operate or admin',
    token_hash   BINARY(32)      NOT NULL COMMENT 'SHA-256 of the token',
    prefix       VARCHAR(16)     NOT NULL COMMENT 'first characters of the token, for display',
    created_at   DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    last_used_at DATETIME(3)     NULL COMMENT 'updated at most once a minute per key and process',
    expires_at   DATETIME(3)     NULL COMMENT 'NULL: never',
    revoked_at   DATETIME(3)     NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_api_keys_name (name),
    UNIQUE KEY uk_api_keys_token_hash (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
