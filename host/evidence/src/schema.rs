//! Versioned schema migrations, tracked in `PRAGMA user_version`.

/// Migration `i` brings the schema from version `i` to version `i + 1`.
/// Never edit a released step: add a new one.
pub const MIGRATIONS: &[&str] = &[
    // 1: the tables, and triggers that keep evidence immutable.
    r#"
    CREATE TABLE programs (
        sha256      TEXT PRIMARY KEY NOT NULL CHECK (length(sha256) = 64),
        content     BLOB NOT NULL,
        size        INTEGER NOT NULL,
        created_at  TEXT NOT NULL
    );
    CREATE TRIGGER programs_no_update BEFORE UPDATE ON programs
        BEGIN SELECT RAISE(ABORT, 'programs are content-addressed and immutable'); END;
    CREATE TRIGGER programs_no_delete BEFORE DELETE ON programs
        BEGIN SELECT RAISE(ABORT, 'programs are content-addressed and immutable'); END;

    CREATE TABLE observations (
        id                          TEXT PRIMARY KEY NOT NULL,
        attempt_key                 TEXT NOT NULL,
        source                      TEXT NOT NULL,
        profile                     TEXT NOT NULL,
        profile_fingerprint         TEXT NOT NULL,
        profile_fingerprint_sha256  TEXT NOT NULL,
        program_sha256              TEXT NOT NULL,
        invocations                 TEXT NOT NULL,
        run                         TEXT NOT NULL,
        created_at                  TEXT NOT NULL,
        record_sha256               TEXT NOT NULL
    );
    CREATE TRIGGER observations_no_update BEFORE UPDATE ON observations
        BEGIN SELECT RAISE(ABORT, 'observations are immutable evidence'); END;
    CREATE TRIGGER observations_no_delete BEFORE DELETE ON observations
        BEGIN SELECT RAISE(ABORT, 'observations are immutable evidence'); END;

    CREATE TABLE scores (
        id                  INTEGER PRIMARY KEY AUTOINCREMENT,
        item_id             TEXT,
        origin              TEXT NOT NULL CHECK (origin IN ('execute', 'replay', 'rescore')),
        program_sha256      TEXT NOT NULL,
        profile             TEXT NOT NULL,
        expectation         TEXT NOT NULL,
        expectation_sha256  TEXT NOT NULL,
        status              TEXT NOT NULL CHECK (status IN ('complete', 'undetermined')),
        value               INTEGER CHECK (
            (status = 'complete' AND value IN (0, 1))
            OR (status = 'undetermined' AND value IS NULL)),
        rationale           TEXT NOT NULL,
        reason              TEXT,
        cases               TEXT NOT NULL,
        created_at          TEXT NOT NULL
    );
    CREATE TRIGGER scores_no_update BEFORE UPDATE ON scores
        BEGIN SELECT RAISE(ABORT, 'scores are append-only'); END;
    CREATE TRIGGER scores_no_delete BEFORE DELETE ON scores
        BEGIN SELECT RAISE(ABORT, 'scores are append-only'); END;

    CREATE TABLE score_observations (
        score_id        INTEGER NOT NULL REFERENCES scores(id),
        position        INTEGER NOT NULL,
        observation_id  TEXT NOT NULL REFERENCES observations(id),
        PRIMARY KEY (score_id, position)
    );
    CREATE TRIGGER score_observations_no_update BEFORE UPDATE ON score_observations
        BEGIN SELECT RAISE(ABORT, 'score links are append-only'); END;
    CREATE TRIGGER score_observations_no_delete BEFORE DELETE ON score_observations
        BEGIN SELECT RAISE(ABORT, 'score links are append-only'); END;
    "#,
    // 2: indexes for the lookups the CLI makes (attempt, program, item, links).
    r#"
    CREATE INDEX observations_by_attempt ON observations(attempt_key);
    CREATE INDEX observations_by_program ON observations(program_sha256);
    CREATE INDEX scores_by_item ON scores(item_id, id);
    CREATE INDEX score_observations_by_observation ON score_observations(observation_id);
    "#,
    // 3: leases, so that processes sharing a store run each attempt once.
    // Not evidence: a row lives while its owner runs the attempt (renewed),
    // is deleted when the owner is done, and an expired one (its owner died)
    // is taken over. Times are unix milliseconds.
    r#"
    CREATE TABLE leases (
        attempt_key  TEXT PRIMARY KEY NOT NULL,
        owner        TEXT NOT NULL,
        acquired_at  INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL
    );
    "#,
    // 4: a server's asynchronous submissions (Judge0's tokens), so that a
    // result can be fetched after a restart. Not evidence: a row is written
    // when a submission is accepted and completed once (its result names the
    // observation, which is the evidence). `owner` is the server process that
    // runs it, so an unfinished row whose owner died can be told apart.
    r#"
    CREATE TABLE submissions (
        token        TEXT PRIMARY KEY NOT NULL,
        dialect      TEXT NOT NULL,
        owner        TEXT NOT NULL,
        request      TEXT NOT NULL,
        result       TEXT,
        created_at   TEXT NOT NULL,
        finished_at  TEXT
    );
    "#,
    // 5: provenance. `store_identity`: this store's own id (random, made
    // here), which a store it is merged into records as where the evidence
    // came from. `observation_origins`: an observation merged from another
    // store (its file, its claimed identity, whether the operator trusted
    // it); no row: this store ran it (every observation stored before this
    // step counts as this store's own). Only trusted evidence is reused by
    // `score`; the rest serves replay, rescore and reports.
    r#"
    CREATE TABLE store_identity (
        singleton   INTEGER PRIMARY KEY NOT NULL CHECK (singleton = 1),
        id          TEXT NOT NULL CHECK (length(id) = 32),
        created_at  TEXT NOT NULL
    );
    INSERT INTO store_identity (singleton, id, created_at)
        VALUES (1, lower(hex(randomblob(16))), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
    CREATE TRIGGER store_identity_no_update BEFORE UPDATE ON store_identity
        BEGIN SELECT RAISE(ABORT, 'a store''s identity never changes'); END;

    CREATE TABLE observation_origins (
        observation_id  TEXT PRIMARY KEY NOT NULL REFERENCES observations(id),
        merged_from     TEXT NOT NULL,
        merged_store    TEXT,
        trusted         INTEGER NOT NULL CHECK (trusted IN (0, 1)),
        merged_at       TEXT NOT NULL
    );
    CREATE TRIGGER observation_origins_no_update BEFORE UPDATE ON observation_origins
        BEGIN SELECT RAISE(ABORT, 'an observation''s origin is not changed'); END;
    "#,
    // 6: retention. Evidence is deleted only by a prune, which holds the
    // row of `prune_permit` for the length of its own transaction (no other
    // connection ever sees it); without it, deleting evidence is refused as
    // before. Indexes for finding old rows.
    r#"
    CREATE TABLE prune_permit (
        singleton  INTEGER PRIMARY KEY NOT NULL CHECK (singleton = 1)
    );
    DROP TRIGGER programs_no_delete;
    CREATE TRIGGER programs_no_delete BEFORE DELETE ON programs
        WHEN NOT EXISTS (SELECT 1 FROM prune_permit)
        BEGIN SELECT RAISE(ABORT, 'programs are content-addressed and immutable'); END;
    DROP TRIGGER observations_no_delete;
    CREATE TRIGGER observations_no_delete BEFORE DELETE ON observations
        WHEN NOT EXISTS (SELECT 1 FROM prune_permit)
        BEGIN SELECT RAISE(ABORT, 'observations are immutable evidence'); END;
    DROP TRIGGER scores_no_delete;
    CREATE TRIGGER scores_no_delete BEFORE DELETE ON scores
        WHEN NOT EXISTS (SELECT 1 FROM prune_permit)
        BEGIN SELECT RAISE(ABORT, 'scores are append-only'); END;
    DROP TRIGGER score_observations_no_delete;
    CREATE TRIGGER score_observations_no_delete BEFORE DELETE ON score_observations
        WHEN NOT EXISTS (SELECT 1 FROM prune_permit)
        BEGIN SELECT RAISE(ABORT, 'score links are append-only'); END;
    CREATE INDEX observations_by_time ON observations(created_at);
    CREATE INDEX submissions_by_time ON submissions(finished_at);
    "#,
    // 7: the lock file of the server process that runs a submission
    // (`progscore_sandbox::Owner`): its lock, free, proves that owner gone,
    // also across PID namespaces, where a pid proves nothing. NULL: a row
    // written before this step, by a progscore that can no longer open
    // this store.
    r#"
    ALTER TABLE submissions ADD COLUMN owner_lock TEXT;
    "#,
    // 8: an item's score in [0, 1] under its expectation's score policy,
    // and its groups' points (JSON). NULL: written before scores were kept
    // (its value says all it decided) or undetermined.
    r#"
    ALTER TABLE scores ADD COLUMN score REAL CHECK (score IS NULL OR (score >= 0 AND score <= 1));
    ALTER TABLE scores ADD COLUMN score_groups TEXT;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
