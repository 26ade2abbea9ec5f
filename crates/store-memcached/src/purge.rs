//! Purge by tag and by prefix on memcached, which cannot list its keys (spec/STORES.md §4.4): a purge writes a
//! record (a tag's purge time; a line in the store's prefix list), and every read drops the entries a record
//! covers: created no later than the purge time plus `purge_skew`. The prefix list is read in the same round trip
//! as the keys; tag records take one more, only for entries that carry tags.

use std::collections::HashMap;

use bytes::Bytes;
use larder_format::Header;
use larder_store::keys::internal_key;
use larder_store::StoreError;

use crate::store::Inner;

/// Prefix purges kept in the list at most.
const MAX_PREFIX_LINES: usize = 1000;

/// The key of the store's list of prefix purges.
pub(crate) fn prefix_list_key(prefix: &str) -> String {
    internal_key(prefix, "prefixes", "")
}

impl Inner {
    fn tag_key(&self, tag: &str) -> String {
        internal_key(&self.prefix, "tag", tag)
    }

    /// `values` (for the callers' `keys`) without the entries a purge record covers.
    pub(crate) async fn drop_purged(
        &self,
        keys: &[&str],
        mut values: Vec<Option<Bytes>>,
        prefix_list: Option<Bytes>,
    ) -> Result<Vec<Option<Bytes>>, StoreError> {
        let prefixes = prefix_list.as_deref().map(parse_prefix_list).unwrap_or_default();
        let mut tagged: Vec<(usize, u64, Vec<String>)> = Vec::new();
        for (i, value) in values.iter_mut().enumerate() {
            let Some(bytes) = value.as_ref() else { continue };
            let Ok((header, _)) = Header::parse(bytes) else { continue };
            let created = header.created_at;
            let purged_by_prefix = prefixes
                .iter()
                .any(|(at, prefix)| keys[i].starts_with(prefix.as_str()) && created <= at + self.purge_skew_ms);
            if purged_by_prefix {
                *value = None;
            } else if !header.tags.is_empty() {
                tagged.push((i, created, header.tags.iter().map(|t| (*t).to_owned()).collect()));
            }
        }
        if tagged.is_empty() {
            return Ok(values);
        }
        let mut tags: Vec<String> = tagged.iter().flat_map(|(_, _, tags)| tags.iter().cloned()).collect();
        tags.sort_unstable();
        tags.dedup();
        let record_keys: Vec<String> = tags.iter().map(|t| self.tag_key(t)).collect();
        let refs: Vec<&str> = record_keys.iter().map(String::as_str).collect();
        let records = self.get_stored(&refs).await?;
        let purged_at: HashMap<String, u64> =
            tags.into_iter().zip(records).filter_map(|(tag, record)| Some((tag, parse_ms(&record?)?))).collect();
        for (i, created, entry_tags) in &tagged {
            let (i, created) = (*i, *created);
            let purged = entry_tags
                .iter()
                .any(|t| purged_at.get(t.as_str()).is_some_and(|at| created <= at + self.purge_skew_ms));
            if purged {
                values[i] = None;
            }
        }
        Ok(values)
    }

    /// Writes the tag's purge time.
    pub(crate) async fn record_tag_purge(&self, tag: &str) -> Result<(), StoreError> {
        let now = larder_format::now_ms().to_string();
        self.set_with(&self.tag_key(tag), now.as_bytes(), 0, "").await.map(|_| ())
    }

    /// Adds a line to the prefix list, by compare-and-swap so that concurrent purges from other processes are
    /// all kept.
    pub(crate) async fn record_prefix_purge(&self, prefix: &str) -> Result<(), StoreError> {
        if !self.prefix_purge {
            return Err(StoreError::Unsupported {
                backend: "memcached",
                operation: "purge by prefix with prefix_purge=false",
            });
        }
        if prefix.bytes().any(|b| b <= 0x20 || b == 0x7f) {
            // No stored key contains these bytes (FORMAT.md §5.1): nothing can match.
            return Ok(());
        }
        let key = self.prefix_list_key.clone();
        for _ in 0..50 {
            let now = larder_format::now_ms();
            let current = self.get_with_cas(&key).await?;
            let mut lines = current.as_ref().map(|(data, _)| parse_prefix_list(data)).unwrap_or_default();
            lines.retain(|(at, p)| now.saturating_sub(*at) <= self.purge_retention_ms && p != prefix);
            lines.push((now, prefix.to_owned()));
            if lines.len() > MAX_PREFIX_LINES {
                lines.drain(..lines.len() - MAX_PREFIX_LINES);
            }
            let text: String = lines.iter().map(|(at, p)| format!("{at} {p}\n")).collect();
            let stored = match current {
                Some((_, cas)) => self.set_with(&key, text.as_bytes(), 0, &format!("C{cas}")).await?,
                None => self.set_with(&key, text.as_bytes(), 0, "ME").await?,
            };
            if stored {
                return Ok(());
            }
        }
        Err(StoreError::Server {
            backend: "memcached",
            server: key,
            message: "the prefix list kept changing under 50 attempts to update it".into(),
        })
    }
}

/// `<ms> <prefix>\n` lines; malformed lines are skipped.
fn parse_prefix_list(data: &[u8]) -> Vec<(u64, String)> {
    String::from_utf8_lossy(data)
        .lines()
        .filter_map(|line| {
            let (at, prefix) = line.split_once(' ')?;
            Some((at.parse().ok()?, prefix.to_owned()))
        })
        .collect()
}

fn parse_ms(data: &[u8]) -> Option<u64> {
    std::str::from_utf8(data).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_lines_parse_and_skip_garbage() {
        let lines = parse_prefix_list(b"100 GET:http://a/\n200 \nnot a line\n300 x/y\n");
        assert_eq!(lines, vec![(100, "GET:http://a/".into()), (200, String::new()), (300, "x/y".into())]);
    }
}
