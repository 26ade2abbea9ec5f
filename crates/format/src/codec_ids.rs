//! The numbered choices in an entry's header (kind, serializer, compressor), their wire ids and their names. The
//! names are the ones the CLI flags, the vectors and every other language use.

use std::fmt;
use std::str::FromStr;

use crate::error::{DecodeError, ErrorKind};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal, { $($variant:ident = $id:literal, $text:literal;)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)+
        }

        impl $name {
            /// Every value, in id order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The byte written in the header.
            pub fn id(self) -> u8 {
                match self {
                    $($name::$variant => $id,)+
                }
            }

            /// The name used by the CLI, the spec and the vectors.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// Reads the header byte; an unknown id is an `unknown_codec` error.
            pub fn from_id(id: u8) -> Result<Self, DecodeError> {
                match id {
                    $($id => Ok($name::$variant),)+
                    other => Err(DecodeError::new(
                        ErrorKind::UnknownCodec,
                        format!("unknown {} id {other}", $what),
                    )),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                    format!("unknown {} {s:?} (expected one of: {})", $what, names.join(", "))
                })
            }
        }
    };
}

wire_enum!(
    /// What the payload holds.
    Kind, "kind", {
        Value = 0, "value";
        Response = 1, "response";
    }
);

wire_enum!(
    /// How the value was turned into bytes.
    Serializer, "serializer", {
        Raw = 0, "raw";
        MsgPack = 1, "msgpack";
        Json = 2, "json";
        Text = 3, "text";
    }
);

wire_enum!(
    /// How the serialized bytes were compressed.
    Compressor, "compressor", {
        None = 0, "none";
        Lz4 = 1, "lz4";
        Snappy = 2, "snappy";
        Zstd = 3, "zstd";
        Brotli = 4, "brotli";
        Gzip = 5, "gzip";
    }
);
