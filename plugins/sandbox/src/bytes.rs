//! Byte strings that survive a JSON round trip unchanged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes that are not necessarily UTF-8 (program output, stdin).
///
/// In JSON they are a plain string when the bytes are valid UTF-8, and
/// `{"base64": "..."}` otherwise, so nothing is lost or replaced.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ByteString(pub Vec<u8>);

impl ByteString {
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes as text, with invalid UTF-8 replaced (for display only).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for ByteString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

impl From<Vec<u8>> for ByteString {
    fn from(bytes: Vec<u8>) -> Self {
        ByteString(bytes)
    }
}

impl From<&[u8]> for ByteString {
    fn from(bytes: &[u8]) -> Self {
        ByteString(bytes.to_vec())
    }
}

impl From<&str> for ByteString {
    fn from(text: &str) -> Self {
        ByteString(text.as_bytes().to_vec())
    }
}

impl Serialize for ByteString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("base64", &BASE64.encode(&self.0))?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for ByteString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Encoded { base64: String },
        }
        match Repr::deserialize(deserializer) {
            Ok(Repr::Text(text)) => Ok(ByteString(text.into_bytes())),
            Ok(Repr::Encoded { base64 }) => BASE64
                .decode(base64.as_bytes())
                .map(ByteString)
                .map_err(|e| serde::de::Error::custom(format!("invalid base64 bytes: {e}"))),
            Err(_) => Err(serde::de::Error::custom(
                "expected a string or {\"base64\": \"...\"}",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_a_plain_string_and_binary_is_base64() {
        let text = ByteString::from("héllo\n");
        assert_eq!(serde_json::to_string(&text).unwrap(), "\"héllo\\n\"");
        let binary = ByteString(vec![0xff, 0x00, b'a']);
        let json = serde_json::to_string(&binary).unwrap();
        assert_eq!(json, "{\"base64\":\"/wBh\"}");
        let back: ByteString = serde_json::from_str(&json).unwrap();
        assert_eq!(back, binary);
    }

    #[test]
    fn bad_base64_names_the_problem() {
        let err = serde_json::from_str::<ByteString>("{\"base64\": \"@@\"}").unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");
    }
}
