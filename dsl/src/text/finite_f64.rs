//! Serde helpers for `f64` fields that may hold `inf`, `-inf` or NaN (a causal mask's
//! fill value), which JSON numbers cannot: those are written as the strings `"inf"`,
//! `"-inf"` and `"nan"`; finite values stay numbers. Use with
//! `#[serde(with = "crate::text::finite_f64")]`, or `finite_f64::vec` on a `Vec<f64>`.

use serde::de::{Error, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;

/// Writes a finite value as a number, a non-finite one as a string.
pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    match super::syntax::float(*value).as_str() {
        name @ ("inf" | "-inf" | "nan") => serializer.serialize_str(name),
        _ => serializer.serialize_f64(*value),
    }
}

/// Reads a number or one of `"inf"`, `"-inf"`, `"nan"`.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    deserializer.deserialize_any(FloatVisitor)
}

struct FloatVisitor;

impl Visitor<'_> for FloatVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or one of \"inf\", \"-inf\", \"nan\"")
    }

    fn visit_f64<E: Error>(self, value: f64) -> Result<f64, E> {
        Ok(value)
    }

    fn visit_i64<E: Error>(self, value: i64) -> Result<f64, E> {
        Ok(value as f64)
    }

    fn visit_u64<E: Error>(self, value: u64) -> Result<f64, E> {
        Ok(value as f64)
    }

    fn visit_str<E: Error>(self, value: &str) -> Result<f64, E> {
        match value {
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            _ => Err(E::invalid_value(serde::de::Unexpected::Str(value), &self)),
        }
    }
}

/// The same for every element of a `Vec<f64>`.
pub mod vec {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    struct Element(#[serde(with = "super")] f64);

    /// Writes each element as [`super::serialize`] does.
    pub fn serialize<S: Serializer>(values: &[f64], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|&v| Element(v)))
    }

    /// Reads each element as [`super::deserialize`] does.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f64>, D::Error> {
        let elements = Vec::<Element>::deserialize(deserializer)?;
        Ok(elements.into_iter().map(|Element(v)| v).collect())
    }
}
