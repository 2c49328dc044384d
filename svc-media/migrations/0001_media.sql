-- Chunked uploads, files deduplicated by content hash, and each owner's references to them.

CREATE TABLE upload_parts (
    owner_id   BIGINT      NOT NULL,
    file_id    BIGINT      NOT NULL,
    part       INT         NOT NULL,
    size       INT         NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, file_id, part)
);

-- One row per distinct content; the blob is stored once under its hash.
CREATE TABLE files (
    id         BIGSERIAL   PRIMARY KEY,
    sha256     TEXT        NOT NULL UNIQUE,
    size       BIGINT      NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What an owner uploaded: only the owner may read it through this id.
CREATE TABLE file_refs (
    id         BIGSERIAL   PRIMARY KEY,
    owner_id   BIGINT      NOT NULL,
    file_id    BIGINT      NOT NULL REFERENCES files (id),
    name       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX file_refs_owner ON file_refs (owner_id, id);
