//! Who may call: `Host` names and browser `Origin`s as `[serve] hosts` and
//! `origins` give them, checked and compared in lower case.

/// A `Host` header's value (or a `hosts` entry) as its name and port:
/// `name`, `name:port`, `[v6]`, `[v6]:port`; `None` when it is none of them.
/// The name keeps its brackets and case.
pub fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')? + 1;
        let (name, rest) = host.split_at(end);
        match rest {
            "" => (name, None),
            rest => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    let bracketed = name.len() > 2 && name.starts_with('[') && name.ends_with(']');
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    (bracketed || plain).then_some((name, port))
}

/// A `hosts` entry in lower case without a trailing dot, or why it is not
/// one: a DNS name or an address, with an optional port, as a `Host`
/// header carries it.
pub(super) fn checked_host(host: &str) -> Result<String, String> {
    let lower = host.to_ascii_lowercase();
    match split_host(&lower) {
        Some((name, port)) => {
            let name = name.trim_end_matches('.');
            Ok(match port {
                Some(port) => format!("{name}:{port}"),
                None => name.to_string(),
            })
        }
        None => Err(format!(
            "{host:?} is not a host name as a Host header gives it: write \"sandbox.internal\" (any port) or \"sandbox.internal:8080\", without a scheme or a path"
        )),
    }
}

/// An `origins` entry in lower case (`scheme://host[:port]`, as a
/// browser's `Origin` header gives it), or why it is not one.
pub(super) fn checked_origin(origin: &str) -> Result<String, String> {
    let lower = origin.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.contains('/') && checked_host(rest).is_ok() => {
            Ok(lower)
        }
        _ if lower == "null" => {
            Err("\"null\" is the origin of any sandboxed page or file: it cannot be trusted".into())
        }
        _ => Err(format!(
            "{origin:?} is not an origin as a browser sends it: write \"https://tools.example.org\" or \"http://localhost:3000\" (a scheme, a host, a port; no path, no trailing slash)"
        )),
    }
}
