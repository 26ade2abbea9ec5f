//! `larder store`: read, write, delete and purge entries in any store (spec/STORES.md URLs), in the forms
//! `larder inspect` reads and `larder encode` writes, so an operator can look into memcached or Redis and move
//! entries by hand: `larder encode … | larder store set KEY`, `larder store get KEY | larder inspect`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use larder_format::key::safe_key;
use larder_store::Store;

use crate::commands::read_stdin;
use crate::Failure;

/// Read and write entries in a store: memory, memcached, Redis, Redis Cluster, SQLite, PostgreSQL or files.
///
/// Keys are made safe as spec/FORMAT.md §5.1 says (a safe key is used as given), so `larder key` output can be
/// passed straight in. Exit status: 0 done, 1 not found (get) or the store failed, 2 bad arguments or input.
#[derive(Args)]
pub struct StoreArgs {
    /// The store, e.g. memcached://127.0.0.1:11211, redis://127.0.0.1:6379/0, sqlite:///var/lib/larder.db
    /// (spec/STORES.md §1).
    #[arg(long, env = "LARDER_STORE", value_name = "URL", global = true)]
    store: Option<String>,
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Print the entry stored under KEY (the raw bytes, for `larder inspect`; or --inspect to decode it here).
    Get {
        /// The key, as `larder key URL` prints it for a page, or an app's key (made safe as spec/FORMAT.md §5.1
        /// says).
        key: String,
        /// Print it as `larder inspect` does instead of the raw bytes.
        #[arg(long)]
        inspect: bool,
        /// With --inspect: one JSON object.
        #[arg(long, requires = "inspect")]
        json: bool,
    },
    /// Store an entry (as `larder encode` prints it) under KEY, read from FILE or stdin. An entry already past
    /// its hard expiry (expires_at + stale window) is refused: a store would keep nothing.
    Set {
        /// The key to store it under (made safe as spec/FORMAT.md §5.1 says).
        key: String,
        /// The entry file; - or nothing for stdin.
        file: Option<PathBuf>,
        /// A store-side expiry on top of the entry's own, in seconds.
        #[arg(long, value_name = "SECS")]
        ttl: Option<u64>,
        /// Store the bytes even if they are not a larder entry (a counter, a foreign value).
        #[arg(long)]
        raw: bool,
    },
    /// Delete KEYs; prints how many were present.
    Delete {
        /// The keys (each made safe as spec/FORMAT.md §5.1 says).
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Remove every entry with a tag, or whose key starts with a prefix; prints how many, or on memcached, whose
    /// purges are records readers apply and cannot count, "recorded".
    Purge {
        /// Entries whose header carries this tag (Surrogate-Key values, an app's tags).
        #[arg(long, value_name = "TAG", conflicts_with = "prefix", required_unless_present = "prefix")]
        tag: Option<String>,
        /// Entries whose key starts with this (store keys, as `larder key` prints them: `GET:http://host/path`).
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
    },
    /// Print the store's counters.
    Stats {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: StoreArgs) -> Result<(), Failure> {
    let url = args.store.ok_or_else(|| Failure::input("--store URL is required (or set LARDER_STORE)"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("runtime: {e}")))?;
    runtime.block_on(async move {
        let store = larder_stores::open(&url).await.map_err(|e| Failure::input(e.to_string()))?;
        execute(&store, args.command).await
    })
}

fn failed(error: larder_store::StoreError) -> Failure {
    Failure { status: 1, message: error.to_string() }
}

async fn execute(store: &Arc<dyn larder_store::DynStore>, command: StoreCommand) -> Result<(), Failure> {
    match command {
        StoreCommand::Get { key, inspect, json } => {
            let key = safe_key(&key);
            let value = store.get(&key).await.map_err(failed)?;
            let value = value.ok_or_else(|| Failure { status: 1, message: format!("not found: {key}") })?;
            if inspect {
                crate::commands::inspect::print(
                    value.to_vec(),
                    larder_format::compress::DEFAULT_MAX_SIZE,
                    json,
                    false,
                    false,
                )
            } else {
                crate::output::write_stdout(&value)
            }
        }
        StoreCommand::Set { key, file, ttl, raw } => {
            let bytes = match &file {
                Some(path) if path.as_os_str() != "-" => {
                    std::fs::read(path).map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))?
                }
                _ => read_stdin()?,
            };
            if !raw {
                larder_format::Entry::parse(&bytes).map_err(|e| {
                    Failure::input(format!(
                        "not a larder entry ({}: {}); use --raw to store it anyway",
                        e.kind(),
                        e.detail()
                    ))
                })?;
            }
            if let Some(at) = larder_store::expiry::entry_hard_expiry(&bytes) {
                if at <= larder_format::now_ms() {
                    let when = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(at));
                    return Err(Failure::input(format!(
                        "the entry can no longer be served (its hard expiry, expires_at + stale window, was {when}): \
                         a store keeps nothing past it; encode it again with a later --ttl"
                    )));
                }
            }
            let key = safe_key(&key);
            store.set(&key, &bytes, ttl.map(Duration::from_secs)).await.map_err(failed)?;
            crate::output::print_line(&format!("stored {} bytes under {key}", bytes.len()))
        }
        StoreCommand::Delete { keys } => {
            let keys: Vec<String> = keys.iter().map(|k| safe_key(k)).collect();
            let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let deleted = store.delete_many(&refs).await.map_err(failed)?;
            crate::output::print_line(&deleted.to_string())
        }
        StoreCommand::Purge { tag, prefix } => {
            let purged = match (tag, prefix) {
                (Some(tag), _) => store.purge_tag(&tag).await,
                (None, Some(prefix)) => store.purge_prefix(&prefix).await,
                (None, None) => return Err(Failure::input("give --tag or --prefix")),
            }
            .map_err(failed)?;
            crate::output::print_line(&purged.to_string())
        }
        StoreCommand::Stats { json } => {
            let s = store.stats().await.map_err(failed)?;
            let fields = [
                ("backend", None),
                ("entries", Some(s.entries)),
                ("bytes", Some(s.bytes)),
                ("capacity_bytes", Some(s.capacity_bytes)),
                ("hits", Some(s.hits)),
                ("misses", Some(s.misses)),
                ("inserts", Some(s.inserts)),
                ("evictions", Some(s.evictions)),
                ("expirations", Some(s.expirations)),
                ("rejections", Some(s.rejections)),
                ("foreign_files", Some(s.foreign)),
            ];
            let text = if json {
                let body: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| match value {
                        Some(n) => format!("\"{name}\":{n}"),
                        None => format!("\"{name}\":\"{}\"", store.backend()),
                    })
                    .collect();
                format!("{{{}}}", body.join(","))
            } else {
                fields
                    .iter()
                    .map(|(name, value)| match value {
                        Some(n) => format!("{:<15} {n}", format!("{name}:")),
                        None => format!("{:<15} {}", format!("{name}:"), store.backend()),
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            crate::output::print_line(&text)
        }
    }
}
