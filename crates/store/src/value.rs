//! The bytes a store hands back: `Bytes`, cheap to clone. Every backend makes one its own way (a memory-store hit
//! shares the stored allocation without copying it; a remote store's value is the buffer it read), so `Value`
//! depends on no backend's internals.

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// A stored value, cheap to clone.
#[derive(Clone)]
pub struct Value(Bytes);

impl Value {
    /// Whether `other` is this very stored value (the same memory), not merely equal bytes: a caller that keeps a
    /// decoded form of a value can tell it is still current. While the caller holds a `Value`, its memory cannot
    /// be reused for another value, so the answer cannot be a coincidence.
    pub fn same_entry(&self, other: &Value) -> bool {
        self.0.as_ptr() == other.0.as_ptr() && self.0.len() == other.0.len()
    }

    /// The value as `Bytes` sharing the same memory.
    pub fn to_bytes(&self) -> Bytes {
        self.0.clone()
    }
}

impl Deref for Value {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<Bytes> for Value {
    fn from(bytes: Bytes) -> Value {
        Value(bytes)
    }
}

impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Value {
        Value(Bytes::from(bytes))
    }
}

impl From<Value> for Bytes {
    fn from(value: Value) -> Bytes {
        value.0
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
