//! The tables (spec/STORES.md §6), created when missing, and the schema version a store refuses to run past.

/// The schema this larder writes.
pub const SCHEMA_VERSION: i64 = 1;

/// Which database: the few places their SQL differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The backend's name, as errors, metrics and logs give it.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
        }
    }
}

/// Table names derived from the `table` option.
#[derive(Debug, Clone)]
pub struct Tables {
    pub entries: String,
    pub tags: String,
    pub schema: String,
}

impl Tables {
    pub fn new(entries: &str) -> Tables {
        Tables { entries: entries.to_owned(), tags: format!("{entries}_tags"), schema: format!("{entries}_schema") }
    }
}

/// The statements that create the tables, in order.
pub fn create(dialect: Dialect, t: &Tables) -> Vec<String> {
    let (bytes, text) = match dialect {
        Dialect::Sqlite => ("BLOB", "TEXT"),
        Dialect::Postgres => ("BYTEA", "TEXT COLLATE \"C\""),
    };
    vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {e} (key_hash BIGINT PRIMARY KEY, key {text} NOT NULL, value {bytes} NOT NULL, \
             byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)",
            e = t.entries
        ),
        format!("CREATE INDEX IF NOT EXISTS {e}_key ON {e} (key)", e = t.entries),
        format!("CREATE INDEX IF NOT EXISTS {e}_expires_at ON {e} (expires_at)", e = t.entries),
        format!(
            "CREATE TABLE IF NOT EXISTS {tags} (tag {text} NOT NULL, key_hash BIGINT NOT NULL, PRIMARY KEY (tag, key_hash))",
            tags = t.tags
        ),
        format!("CREATE INDEX IF NOT EXISTS {tags}_key_hash ON {tags} (key_hash)", tags = t.tags),
        format!("CREATE TABLE IF NOT EXISTS {s} (version INTEGER NOT NULL)", s = t.schema),
    ]
}

/// Whether a table name is safe to put into SQL as is (it comes from a URL).
pub fn valid_table_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 48
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
}
