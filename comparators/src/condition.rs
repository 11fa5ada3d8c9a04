//! [`TextCondition`]: how an expectation names a comparator and its
//! parameters, e.g. `{"stdout": {"equals": "9"}}`.

use std::fmt;
use std::str::FromStr;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A condition on one output stream: which comparator, with which parameters.
///
/// Two JSON forms are accepted:
/// - shorthand, one key: `{"NAME": VALUE}` means comparator `NAME` with params
///   `{"value": VALUE}` (e.g. `{"equals": "9"}`, `{"json": {"a": 1}}`);
/// - general: `{"comparator": "NAME", "params": {...}}` (`params` optional,
///   default `{}`), for options or comparators without a `value`.
///
/// A condition serializes back in the form it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCondition {
    comparator: String,
    params: Map<String, Value>,
    shorthand: bool,
}

/// Why a JSON value is not a [`TextCondition`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid text condition: {0}")]
pub struct ConditionError(String);

impl TextCondition {
    /// The general form: comparator `name` with `params` (a JSON object).
    pub fn new(name: impl Into<String>, params: Map<String, Value>) -> Self {
        TextCondition {
            comparator: name.into(),
            params,
            shorthand: false,
        }
    }

    /// The shorthand form: comparator `name` with params `{"value": value}`.
    pub fn shorthand(name: impl Into<String>, value: Value) -> Self {
        let mut params = Map::new();
        params.insert("value".to_string(), value);
        TextCondition {
            comparator: name.into(),
            params,
            shorthand: true,
        }
    }

    /// The comparator's name.
    pub fn comparator(&self) -> &str {
        &self.comparator
    }

    /// The parameters, as an object.
    pub fn params(&self) -> &Map<String, Value> {
        &self.params
    }

    /// The parameters as JSON text, as comparators receive them.
    pub fn params_json(&self) -> String {
        Value::Object(self.params.clone()).to_string()
    }

    /// Parses either form from a JSON value.
    pub fn from_value(value: Value) -> Result<Self, ConditionError> {
        let Value::Object(mut object) = value else {
            return Err(ConditionError(format!(
                "expected an object like {{\"equals\": \"9\"}} or \
                 {{\"comparator\": \"NAME\", \"params\": {{...}}}}, got {value}"
            )));
        };
        if object.contains_key("comparator") {
            let name = match object.remove("comparator") {
                Some(Value::String(name)) if !name.is_empty() => name,
                other => {
                    return Err(ConditionError(format!(
                        "\"comparator\" must be a non-empty string, got {}",
                        other.unwrap_or(Value::Null)
                    )));
                }
            };
            let params = match object.remove("params") {
                None => Map::new(),
                Some(Value::Object(params)) => params,
                Some(other) => {
                    return Err(ConditionError(format!(
                        "\"params\" of comparator \"{name}\" must be an object, got {other}"
                    )));
                }
            };
            if let Some(key) = object.keys().next() {
                return Err(ConditionError(format!(
                    "unexpected key \"{key}\" next to \"comparator\" (options go in \"params\")"
                )));
            }
            return Ok(TextCondition::new(name, params));
        }
        if object.len() != 1 {
            let keys: Vec<&String> = object.keys().collect();
            return Err(ConditionError(format!(
                "the shorthand form has exactly one key, the comparator's name (got {keys:?}); \
                 to give options use {{\"comparator\": \"NAME\", \"params\": {{...}}}}"
            )));
        }
        let Some((name, value)) = object.into_iter().next() else {
            return Err(ConditionError("empty condition".into()));
        };
        if name.is_empty() || name == "params" {
            return Err(ConditionError(format!(
                "\"{name}\" is not a comparator name"
            )));
        }
        Ok(TextCondition::shorthand(name, value))
    }

    /// The JSON value, in the form it was written in.
    pub fn to_value(&self) -> Value {
        let mut object = Map::new();
        match (self.shorthand, self.params.get("value")) {
            (true, Some(value)) if self.params.len() == 1 => {
                object.insert(self.comparator.clone(), value.clone());
            }
            _ => {
                object.insert("comparator".into(), Value::String(self.comparator.clone()));
                object.insert("params".into(), Value::Object(self.params.clone()));
            }
        }
        Value::Object(object)
    }
}

impl FromStr for TextCondition {
    type Err = ConditionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let value: Value =
            serde_json::from_str(s).map_err(|e| ConditionError(format!("not JSON: {e}")))?;
        TextCondition::from_value(value)
    }
}

impl fmt::Display for TextCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

impl<'de> Deserialize<'de> for TextCondition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        TextCondition::from_value(value).map_err(|e| D::Error::custom(e.0))
    }
}

impl Serialize for TextCondition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}
