//! The bytes a store hands back. A memory-store hit shares the stored allocation (no copy); a remote store's value
//! is plain `Bytes`. Both read as `&[u8]`.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

use crate::memory::entry::EntryRef;

/// A stored value, cheap to clone.
#[derive(Clone)]
pub struct Value(Repr);

#[derive(Clone)]
enum Repr {
    Entry(EntryRef),
    Bytes(Bytes),
}

impl Value {
    pub(crate) fn from_entry(entry: EntryRef) -> Value {
        Value(Repr::Entry(entry))
    }

    /// Whether `other` is this very stored value (the same memory-store entry, or the same bytes), not merely
    /// equal bytes: a caller that keeps a decoded form of a value can tell it is still current. While the caller
    /// holds a `Value`, its memory cannot be reused for another entry, so the answer cannot be a coincidence.
    pub fn same_entry(&self, other: &Value) -> bool {
        match (&self.0, &other.0) {
            (Repr::Entry(a), Repr::Entry(b)) => a.same(b),
            (Repr::Bytes(a), Repr::Bytes(b)) => a.as_ptr() == b.as_ptr() && a.len() == b.len(),
            _ => false,
        }
    }

    /// The value as `Bytes` sharing the same memory (one small allocation for memory-store values).
    pub fn to_bytes(&self) -> Bytes {
        match &self.0 {
            Repr::Bytes(bytes) => bytes.clone(),
            Repr::Entry(_) => Bytes::from_owner(self.clone()),
        }
    }
}

impl Deref for Value {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Entry(entry) => entry.value(),
            Repr::Bytes(bytes) => bytes,
        }
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<Bytes> for Value {
    fn from(bytes: Bytes) -> Value {
        Value(Repr::Bytes(bytes))
    }
}

impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Value {
        Value(Repr::Bytes(Bytes::from(bytes)))
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        **self == **other
    }
}

impl PartialEq<[u8]> for Value {
    fn eq(&self, other: &[u8]) -> bool {
        &**self == other
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Value({} bytes)", self.len())
    }
}
