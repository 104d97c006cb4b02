//! Ordered GGUF metadata: a `Vec` of key/value pairs in file order (never a map, so a rewrite
//! emits the keys in the order they were read) and the typed getters the runner uses.
//!
//! Spec: ggml `docs/gguf.md` "Standardized key-value pairs"; `general.alignment` is `uint32`
//! (../shared/design/formats.md §5.1).

use super::types::{Value, ValueType};

/// Key/value pairs in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    /// The pairs, in order. Keys are unique (the reader and writer both refuse duplicates).
    pub kv: Vec<(String, Value)>,
}

/// A getter's failure: the key is missing or has another type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetaError {
    /// The key is absent.
    #[error("gguf metadata: key `{0}` is missing")]
    Missing(String),
    /// The key has another type.
    #[error("gguf metadata: key `{key}` is {found}, expected {expected}")]
    Type {
        /// The key.
        key: String,
        /// What the getter wanted.
        expected: &'static str,
        /// What the file has.
        found: String,
    },
}

impl Metadata {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replace `key`'s value in place (keeping its position), or append it.
    pub fn set(&mut self, key: &str, value: Value) {
        match self.kv.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.kv.push((key.to_string(), value)),
        }
    }

    /// Remove `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.kv.iter().position(|(k, _)| k == key)?;
        Some(self.kv.remove(i).1)
    }

    fn need(&self, key: &str) -> Result<&Value, MetaError> {
        self.get(key)
            .ok_or_else(|| MetaError::Missing(key.to_string()))
    }

    fn wrong(key: &str, expected: &'static str, v: &Value) -> MetaError {
        let found = match v {
            Value::StringArray(_) => "array of string".to_string(),
            Value::NumArray { elem, .. } => format!("array of {}", elem.name()),
            other => other.value_type().name().to_string(),
        };
        MetaError::Type {
            key: key.to_string(),
            expected,
            found,
        }
    }

    /// A UTF-8 string value.
    pub fn get_str(&self, key: &str) -> Result<&str, MetaError> {
        match self.need(key)? {
            Value::String(s) => std::str::from_utf8(s).map_err(|_| MetaError::Type {
                key: key.to_string(),
                expected: "UTF-8 string",
                found: "string with invalid UTF-8".to_string(),
            }),
            v => Err(Self::wrong(key, "string", v)),
        }
    }

    /// A `uint32` value (strict type, like `gguf_get_val_u32`).
    pub fn get_u32(&self, key: &str) -> Result<u32, MetaError> {
        match self.need(key)? {
            Value::U32(v) => Ok(*v),
            v => Err(Self::wrong(key, "uint32", v)),
        }
    }

    /// Any integer type holding a non-negative value (for keys whose writers disagree on the
    /// integer width, e.g. `split.count` is `uint16` in llama.cpp).
    pub fn get_uint(&self, key: &str) -> Result<u64, MetaError> {
        let v = self.need(key)?;
        v.as_u64()
            .ok_or_else(|| Self::wrong(key, "non-negative integer", v))
    }

    /// A `float32` value.
    pub fn get_f32(&self, key: &str) -> Result<f32, MetaError> {
        match self.need(key)? {
            Value::F32(v) => Ok(*v),
            v => Err(Self::wrong(key, "float32", v)),
        }
    }

    /// A `bool` value.
    pub fn get_bool(&self, key: &str) -> Result<bool, MetaError> {
        match self.need(key)? {
            Value::Bool(v) => Ok(*v),
            v => Err(Self::wrong(key, "bool", v)),
        }
    }

    /// An array of UTF-8 strings.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, MetaError> {
        match self.need(key)? {
            Value::StringArray(items) => items
                .iter()
                .map(|s| {
                    std::str::from_utf8(s).map_err(|_| MetaError::Type {
                        key: key.to_string(),
                        expected: "array of UTF-8 string",
                        found: "a string with invalid UTF-8".to_string(),
                    })
                })
                .collect(),
            v => Err(Self::wrong(key, "array of string", v)),
        }
    }

    /// An array of raw strings (bytes), for vocabularies that are not valid UTF-8.
    pub fn get_bytes_array(&self, key: &str) -> Result<&[Vec<u8>], MetaError> {
        match self.need(key)? {
            Value::StringArray(items) => Ok(items),
            v => Err(Self::wrong(key, "array of string", v)),
        }
    }

    fn num_array(&self, key: &str, want: ValueType) -> Result<&[u8], MetaError> {
        match self.need(key)? {
            Value::NumArray { elem, raw, .. } if *elem == want => Ok(raw),
            v => Err(Self::wrong(key, want.name(), v)),
        }
    }

    /// An array of `int32`.
    pub fn get_i32_array(&self, key: &str) -> Result<Vec<i32>, MetaError> {
        let raw = self.num_array(key, ValueType::I32)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// An array of `uint32`.
    pub fn get_u32_array(&self, key: &str) -> Result<Vec<u32>, MetaError> {
        let raw = self.num_array(key, ValueType::U32)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// An array of `float32`.
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>, MetaError> {
        let raw = self.num_array(key, ValueType::F32)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_in_place_and_appends_new_keys() {
        let mut m = Metadata::default();
        m.set("a", Value::U32(1));
        m.set("b", Value::str("x"));
        m.set("a", Value::U32(2));
        assert_eq!(m.kv[0], ("a".to_string(), Value::U32(2)));
        assert_eq!(m.get_str("b"), Ok("x"));
        assert!(matches!(m.get_u32("b"), Err(MetaError::Type { .. })));
        assert_eq!(m.get_u32("c"), Err(MetaError::Missing("c".into())));
        m.set("arr", Value::i32_array(&[1, -2]));
        assert_eq!(m.get_i32_array("arr"), Ok(vec![1, -2]));
        assert_eq!(m.remove("a"), Some(Value::U32(2)));
        assert_eq!(m.kv.len(), 2);
    }
}
