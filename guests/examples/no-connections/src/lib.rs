//! Example user comparator of `progscore:comparator@0.2.0`: the invocation
//! tried no connection, except to the addresses allowed.
//!
//! Parameters (optional): `allow`, a list of `"address:port"` strings. The
//! stream itself is not judged (pair it with another condition for that).
//!
//! A recorded connection to an address not allowed proves a mismatch. Only a
//! complete trace that covers connections proves there was none; anything
//! less (not traced, events not kept, an incomplete trace, arguments the
//! program could have changed) is undetermined.

wit_bindgen::generate!({
    path: "../../../wit/comparator@0.2.0",
    world: "comparator",
});

use progscore::comparator::types::BehaviourTrace;

struct NoConnections;

fn allowed(params: &str) -> Result<Vec<String>, String> {
    let value: serde_json::Value =
        serde_json::from_str(params).map_err(|e| format!("params are not JSON: {e}"))?;
    let object = value.as_object().ok_or("params must be a JSON object")?;
    let mut allow = Vec::new();
    for (name, value) in object {
        match name.as_str() {
            "allow" => {
                let list = value
                    .as_array()
                    .ok_or("\"allow\" must be a list of \"address:port\"")?;
                for entry in list {
                    let text = entry
                        .as_str()
                        .ok_or("\"allow\" must be a list of \"address:port\"")?;
                    allow.push(text.to_string());
                }
            }
            other => return Err(format!("unknown parameter \"{other}\" (known: allow)")),
        }
    }
    Ok(allow)
}

/// `address:port` of a connect event, as far as the trace read it.
fn target(json: &str) -> String {
    let event: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let address = event.get("address").and_then(|a| a.as_str()).unwrap_or("?");
    match event.get("port").and_then(|p| p.as_u64()) {
        Some(port) => format!("{address}:{port}"),
        None => address.to_string(),
    }
}

fn judge(trace: &BehaviourTrace, allow: &[String]) -> Verdict {
    let mut kept = 0u64;
    for event in trace.events.iter().filter(|e| e.kind == "net.connect") {
        kept += 1;
        let to = target(&event.json);
        if !allow.contains(&to) {
            let outcome = event.outcome.clone().unwrap_or_else(|| "attempted".into());
            return Verdict::Mismatch(format!(
                "tried to connect to {to} ({outcome}) at {} ms",
                event.at_ms
            ));
        }
    }
    if !trace.traced_kinds.iter().any(|kind| kind == "net.connect") {
        return Verdict::Undetermined("the trace does not cover connections".into());
    }
    if let Some(why) = &trace.incomplete {
        return Verdict::Undetermined(format!("the trace is incomplete: {why}"));
    }
    let seen = trace
        .counts
        .iter()
        .find(|count| count.kind == "net.connect")
        .map_or(0, |count| count.count);
    if seen > kept {
        return Verdict::Undetermined(format!("{} connection(s) were not kept", seen - kept));
    }
    if kept > 0 {
        if let Some(why) = &trace.arguments_unverified {
            return Verdict::Undetermined(format!("the allowed addresses are not proven: {why}"));
        }
    }
    Verdict::Match
}

impl Guest for NoConnections {
    fn validate(params: String) -> Result<(), String> {
        allowed(&params).map(|_| ())
    }

    fn compare(
        params: String,
        _observed: ObservedStream,
        behaviour: Behaviour,
    ) -> Result<Verdict, String> {
        let allow = allowed(&params)?;
        Ok(match behaviour {
            Behaviour::Traced(trace) => judge(&trace, &allow),
            Behaviour::NotTraced(why) => Verdict::Undetermined(format!("not traced: {why}")),
            Behaviour::Absent => {
                Verdict::Undetermined("the profile does not trace behaviour".into())
            }
        })
    }
}

export!(NoConnections);
