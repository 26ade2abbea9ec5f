//! The serializers of spec/FORMAT.md §2 for any serde type: MessagePack (named maps, as every other language writes
//! them), JSON, raw bytes and UTF-8 text. Raw and text take values that serialize as bytes or a string.

use serde::de::value::{BorrowedBytesDeserializer, BorrowedStrDeserializer};
use serde::de::DeserializeOwned;
use serde::ser::{Impossible, Serialize};

use crate::codec_ids::Serializer;
use crate::error::{DecodeError, EncodeError, ErrorKind};

/// Appends `value` serialized with `serializer` to `out`.
pub fn serialize_into<T: Serialize + ?Sized>(
    serializer: Serializer,
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match serializer {
        Serializer::MsgPack => rmp_serde::encode::write_named(out, value).map_err(EncodeError::serialize),
        Serializer::Json => serde_json::to_writer(out, value).map_err(EncodeError::serialize),
        Serializer::Raw | Serializer::Text => {
            let text_only = serializer == Serializer::Text;
            value.serialize(BytesCapture { out, text_only })
        }
    }
}

/// Reads a value of type `T` from a decompressed payload.
pub fn deserialize<T: DeserializeOwned>(serializer: Serializer, payload: &[u8]) -> Result<T, DecodeError> {
    match serializer {
        Serializer::MsgPack => {
            // Measure first: this refuses truncated objects and trailing bytes before serde allocates anything.
            let len = crate::msgpack_walk::object_len(payload).map_err(|e| bad_value(format!("msgpack: {e}")))?;
            if len != payload.len() {
                return Err(bad_value(format!("msgpack: {} bytes after the value", payload.len() - len)));
            }
            rmp_serde::from_slice(payload).map_err(|e| bad_value(format!("msgpack: {e}")))
        }
        Serializer::Json => serde_json::from_slice(payload).map_err(|e| bad_value(format!("json: {e}"))),
        Serializer::Text => {
            let text = std::str::from_utf8(payload).map_err(|e| bad_value(format!("text is not UTF-8: {e}")))?;
            T::deserialize(BorrowedStrDeserializer::<serde::de::value::Error>::new(text))
                .map_err(|e| bad_value(format!("text: {e}")))
        }
        Serializer::Raw => T::deserialize(BorrowedBytesDeserializer::<serde::de::value::Error>::new(payload))
            .map_err(|e| bad_value(format!("raw: {e}"))),
    }
}

fn bad_value(detail: String) -> DecodeError {
    DecodeError::new(ErrorKind::BadValue, detail)
}

/// A serde serializer that accepts only a string or bytes and appends them verbatim: the raw and text formats.
struct BytesCapture<'a> {
    out: &'a mut Vec<u8>,
    text_only: bool,
}

impl BytesCapture<'_> {
    fn refuse<T>(&self) -> Result<T, EncodeError> {
        Err(EncodeError::Invalid(if self.text_only {
            "the text serializer takes a string".into()
        } else {
            "the raw serializer takes bytes or a string".into()
        }))
    }
}

macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ret:ty;)+) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ret, EncodeError> { self.refuse() })+
    };
}

impl serde::ser::Error for EncodeError {
    fn custom<M: std::fmt::Display>(msg: M) -> Self {
        EncodeError::Serialize(msg.to_string())
    }
}

impl serde::Serializer for BytesCapture<'_> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Impossible<(), EncodeError>;
    type SerializeTuple = Impossible<(), EncodeError>;
    type SerializeTupleStruct = Impossible<(), EncodeError>;
    type SerializeTupleVariant = Impossible<(), EncodeError>;
    type SerializeMap = Impossible<(), EncodeError>;
    type SerializeStruct = Impossible<(), EncodeError>;
    type SerializeStructVariant = Impossible<(), EncodeError>;

    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.serialize_str(v.encode_utf8(&mut [0u8; 4]))
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), EncodeError> {
        if self.text_only {
            let text = std::str::from_utf8(v)
                .map_err(|e| EncodeError::Invalid(format!("the text serializer takes UTF-8: {e}")))?;
            return self.serialize_str(text);
        }
        self.out.extend_from_slice(v);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), EncodeError> {
        v.serialize(self)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), EncodeError> {
        v.serialize(self)
    }

    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), EncodeError> {
        self.refuse()
    }
}
