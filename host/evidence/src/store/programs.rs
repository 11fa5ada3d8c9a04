//! The programs table: content-addressed program bytes.

use super::*;

impl EvidenceStore {
    /// Stores a program's content (once per content) and returns its sha256,
    /// which is its id.
    pub fn put_program(&self, content: &[u8]) -> Result<String, StoreError> {
        let sha256 = sha256_hex(content);
        let conn = self.lock()?;
        insert_program(&conn, &sha256, content)?;
        Ok(sha256)
    }

    /// A stored program's content by sha256, checked against its id.
    pub fn program(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.lock()?;
        let content: Option<Vec<u8>> = conn
            .query_row(
                "SELECT content FROM programs WHERE sha256 = ?1",
                [sha256],
                |row| row.get(0),
            )
            .optional()
            .map_err(StoreError::sqlite("reading a program"))?;
        match content {
            Some(content) if sha256_hex(&content) != sha256 => Err(StoreError::Tampered {
                what: "program",
                id: sha256.to_string(),
                detail: "content does not hash to its id".into(),
            }),
            other => Ok(other),
        }
    }
}

pub(super) fn insert_program(
    conn: &Connection,
    sha256: &str,
    content: &[u8],
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO programs (sha256, content, size, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (sha256) DO NOTHING",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            sha256,
            content,
            content.len() as i64,
            now_rfc3339()
        ])
    })
    .map_err(StoreError::sqlite("storing a program"))?;
    Ok(())
}
