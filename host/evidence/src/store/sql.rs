//! Small SQL builders for the listing queries.

pub(super) fn where_clause(clauses: &[String]) -> String {
    if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    }
}

pub(super) fn limit_clause(limit: Option<u64>, offset: u64) -> String {
    // Numbers, not user text, so formatting them in is safe. SQLite needs a
    // LIMIT before an OFFSET; -1 means none.
    match (limit, offset) {
        (None, 0) => String::new(),
        (None, offset) => format!(" LIMIT -1 OFFSET {offset}"),
        (Some(limit), offset) => format!(" LIMIT {limit} OFFSET {offset}"),
    }
}
