//! The leases table: which process is running an attempt right now, so that
//! processes sharing one store run each attempt once.
//!
//! A lease is coordination, not evidence: it is taken before a run, renewed
//! while the run lasts, and deleted by its owner once the run's observation
//! is stored (or the run proved nothing). An owner that dies (SIGKILL, power
//! cut) stops renewing, and its lease is taken over once it has expired.
//! Expired leases are removed whenever a lease is taken and whenever the
//! store is opened, so a dead owner's rows do not stay behind.
//! Times are unix milliseconds from the system clock of the process writing
//! them: processes sharing a store must share a clock (one machine, as SQLite
//! files are shared anyway). A clock that jumps makes a lease end early (the
//! attempt may then run twice, and the store keeps the first observation) or
//! late (a waiter waits longer); never a wrong verdict.

use super::*;

/// A lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The attempt it is for.
    pub attempt_key: String,
    /// Who holds it.
    pub owner: String,
    /// When it was taken (unix milliseconds).
    pub acquired_at_ms: i64,
    /// When it ends unless renewed (unix milliseconds).
    pub expires_at_ms: i64,
}

impl Lease {
    /// Whether it has ended by `now_ms` (unix milliseconds).
    pub fn is_expired_at(&self, now_ms: i64) -> bool {
        self.expires_at_ms <= now_ms
    }
}

/// Now, in unix milliseconds.
pub fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn expiry(now_ms: i64, ttl: Duration) -> i64 {
    now_ms.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

impl EvidenceStore {
    /// Takes the lease of `attempt_key` for `owner` until `ttl` from now:
    /// `true` when it was free, expired, or already `owner`'s (then it is
    /// extended); `false` when another owner holds it and it has not expired.
    /// Atomic across processes (one `BEGIN IMMEDIATE` transaction), which
    /// also removes other attempts' expired leases.
    pub fn try_acquire_lease(
        &self,
        attempt_key: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut conn = self.lock()?;
        // A plain read first: a waiter polling a live lease takes no write lock.
        if let Some(held) = read_lease(&conn, attempt_key)?
            && held.owner != owner
            && !held.is_expired_at(now_unix_ms())
        {
            return Ok(false);
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite("starting to take a lease"))?;
        let now = now_unix_ms();
        tx.execute(
            "DELETE FROM leases WHERE expires_at <= ?1 AND attempt_key != ?2",
            params![now, attempt_key],
        )
        .map_err(StoreError::sqlite("removing expired leases"))?;
        let taken = tx
            .execute(
                "INSERT INTO leases (attempt_key, owner, acquired_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (attempt_key) DO UPDATE SET
                     owner = excluded.owner,
                     acquired_at = excluded.acquired_at,
                     expires_at = excluded.expires_at
                 WHERE leases.expires_at <= ?3 OR leases.owner = excluded.owner",
                params![attempt_key, owner, now, expiry(now, ttl)],
            )
            .map_err(StoreError::sqlite("taking a lease"))?;
        tx.commit()
            .map_err(StoreError::sqlite("committing a lease"))?;
        Ok(taken == 1)
    }

    /// Extends `owner`'s lease of `attempt_key` to `ttl` from now; `false`
    /// when it is not `owner`'s any more (released, or expired and taken over).
    pub fn renew_lease(
        &self,
        attempt_key: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        let changed = conn
            .execute(
                "UPDATE leases SET expires_at = ?3 WHERE attempt_key = ?1 AND owner = ?2",
                params![attempt_key, owner, expiry(now_unix_ms(), ttl)],
            )
            .map_err(StoreError::sqlite("renewing a lease"))?;
        Ok(changed == 1)
    }

    /// Ends `owner`'s lease of `attempt_key`; `false` when it was not
    /// `owner`'s (another owner's lease is never touched).
    pub fn release_lease(&self, attempt_key: &str, owner: &str) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        let changed = conn
            .execute(
                "DELETE FROM leases WHERE attempt_key = ?1 AND owner = ?2",
                params![attempt_key, owner],
            )
            .map_err(StoreError::sqlite("releasing a lease"))?;
        Ok(changed == 1)
    }

    /// Removes every expired lease (their holders died or gave up without
    /// releasing them); how many. Only writes when there is one, so opening
    /// a store (which calls it) takes no write lock in the usual case.
    pub fn sweep_expired_leases(&self) -> Result<usize, StoreError> {
        let conn = self.lock()?;
        sweep_expired(&conn)
    }

    /// Removes every lease whose owner starts with `prefix` (a scorer that
    /// ends removes what its flights left, if anything); how many.
    pub fn release_leases_of(&self, prefix: &str) -> Result<usize, StoreError> {
        if prefix.is_empty() {
            return Ok(0);
        }
        let conn = self.lock()?;
        conn.execute(
            "DELETE FROM leases WHERE substr(owner, 1, length(?1)) = ?1",
            params![prefix],
        )
        .map_err(StoreError::sqlite("releasing leases"))
    }

    /// The lease of `attempt_key`, if a row is stored (it may have expired).
    pub fn lease(&self, attempt_key: &str) -> Result<Option<Lease>, StoreError> {
        let conn = self.lock()?;
        read_lease(&conn, attempt_key)
    }
}

/// [`EvidenceStore::sweep_expired_leases`] on a connection.
pub(super) fn sweep_expired(conn: &Connection) -> Result<usize, StoreError> {
    let now = now_unix_ms();
    let any: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM leases WHERE expires_at <= ?1)",
            params![now],
            |row| row.get(0),
        )
        .map_err(StoreError::sqlite("looking for expired leases"))?;
    if !any {
        return Ok(0);
    }
    conn.execute("DELETE FROM leases WHERE expires_at <= ?1", params![now])
        .map_err(StoreError::sqlite("removing expired leases"))
}

fn read_lease(conn: &Connection, attempt_key: &str) -> Result<Option<Lease>, StoreError> {
    conn.prepare_cached(
        "SELECT attempt_key, owner, acquired_at, expires_at FROM leases WHERE attempt_key = ?1",
    )
    .and_then(|mut statement| {
        statement
            .query_row([attempt_key], |row| {
                Ok(Lease {
                    attempt_key: row.get(0)?,
                    owner: row.get(1)?,
                    acquired_at_ms: row.get(2)?,
                    expires_at_ms: row.get(3)?,
                })
            })
            .optional()
    })
    .map_err(StoreError::sqlite("reading a lease"))
}
