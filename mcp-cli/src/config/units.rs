//! Values with a unit or a fixed set of spellings, shared by the formats: timeouts, sizes and
//! the protocol revision. A number must be positive and finite, a revision one we speak;
//! anything else makes the file invalid rather than silently meaning "the default".

use std::time::Duration;

use mcp_proto::Protocol;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// `protocol`: `auto` or a revision we speak; the error names the accepted values.
pub(super) fn protocol<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Protocol>, D::Error> {
    let Some(text) = Option::<String>::deserialize(deserializer)? else {
        return Ok(None);
    };
    Protocol::parse(&text)
        .map(Some)
        .map_err(|error| D::Error::custom(error.to_string()))
}

/// A timeout in seconds.
pub(super) fn seconds<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    timeout(deserializer, 1.0, "seconds")
}

/// A timeout in milliseconds (Gemini CLI, opencode, Codex's `_ms` keys).
pub(super) fn milliseconds<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    timeout(deserializer, 1000.0, "milliseconds")
}

fn timeout<'de, D: Deserializer<'de>>(
    deserializer: D,
    per_second: f64,
    unit: &str,
) -> Result<Option<Duration>, D::Error> {
    let Some(value) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let duration = Duration::try_from_secs_f64(value / per_second).ok();
    match duration.filter(|d| !d.is_zero()) {
        Some(duration) => Ok(Some(duration)),
        None => Err(D::Error::custom(format!(
            "{value} is not a positive number of {unit}"
        ))),
    }
}

/// A size in megabytes (MiB, as the protocol core counts its limit), as bytes.
pub(super) fn megabytes<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<usize>, D::Error> {
    let Some(value) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let bytes = value * 1024.0 * 1024.0;
    // Checked before the cast, which would quietly saturate; NaN fails both comparisons.
    if bytes >= 1.0 && bytes < usize::MAX as f64 {
        Ok(Some(bytes as usize))
    } else {
        Err(D::Error::custom(format!(
            "{value} is not a positive number of megabytes"
        )))
    }
}

/// `max_result_bytes`: a whole number of bytes, at least 1.
pub(super) fn bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<i64>::deserialize(deserializer)? {
        None => Ok(None),
        Some(value) if value >= 1 => Ok(Some(value.unsigned_abs())),
        Some(value) => Err(D::Error::custom(format!(
            "{value} is not a positive number of bytes"
        ))),
    }
}

/// `max_listed`: a whole number of entries, at least 1.
pub(super) fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    match Option::<i64>::deserialize(deserializer)? {
        None => Ok(None),
        Some(value) if value >= 1 => Ok(usize::try_from(value).ok()),
        Some(value) => Err(D::Error::custom(format!(
            "{value} is not a positive number of entries"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use mcp_proto::Protocol;

    use crate::config::testing::{parse, spec};

    #[test]
    fn protocol_is_auto_or_a_revision_we_speak() {
        for (table, key) in [("mcp", "mcp.fx"), ("mcp_servers", "mcp_servers.fx")] {
            let read = |line: &str| {
                let text = format!("[{table}.fx]\ncommand = \"x\"\n{line}\n");
                parse("c.toml", &text).map(|config| spec(&config.servers, "fx").protocol)
            };
            assert_eq!(read("").unwrap(), Protocol::Auto);
            assert_eq!(read("protocol = \"auto\"").unwrap(), Protocol::Auto);
            for revision in ["2026-07-28", "2025-11-25", "2024-11-05"] {
                let line = format!("protocol = \"{revision}\"");
                assert_eq!(read(&line).unwrap(), Protocol::Revision(revision));
            }
            let error = read("protocol = \"2099-01-01\"").unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid config /cfg/c.toml line 3: {key}.protocol: unknown protocol \
                     revision `2099-01-01`: expected `auto` or one of 2026-07-28, 2025-11-25, \
                     2025-06-18, 2025-03-26, 2024-11-05"
                )
            );
            let error = read("protocol = 2025").unwrap_err();
            assert!(
                (error.to_string()).contains(&format!("line 3: {key}.protocol: invalid type")),
                "{error}"
            );
        }
    }

    #[test]
    fn json_formats_accept_protocol_and_ignore_it() {
        // None of these hosts has a key for it; an entry copied from a native file still reads.
        let files = [
            (
                ".mcp.json",
                r#"{"mcpServers": {"fx": {"command": "x", "protocol": "2025-11-25"}}}"#,
            ),
            (
                "mcp.json",
                r#"{"servers": {"fx": {"command": "x", "protocol": "2099-01-01"}}}"#,
            ),
            (
                "opencode.json",
                r#"{"mcp": {"fx": {"type": "local", "command": ["x"], "protocol": "2025-11-25"}}}"#,
            ),
            (
                "settings.json",
                r#"{"context_servers": {"fx": {"command": "x", "protocol": "2025-11-25"}}}"#,
            ),
            (
                "config.json",
                r#"{"mcp": {"servers": [{"name": "fx", "command": "x", "protocol": "2025-11-25"}]}}"#,
            ),
        ];
        for (name, text) in files {
            let config = parse(name, text).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert_eq!(
                spec(&config.servers, "fx").protocol,
                Protocol::Auto,
                "{name}"
            );
        }
    }

    #[test]
    fn timeouts_must_be_positive_and_finite() {
        for value in ["0", "-1", "nan", "inf", "-inf", "1e-12"] {
            let text = format!("[mcp.fx]\ncommand = \"x\"\ntimeout_sec = {value}\n");
            let error = parse("c.toml", &text).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with("invalid config /cfg/c.toml line 3: mcp.fx.timeout_sec: "),
                "{value}: {error}"
            );
            assert!(
                error
                    .to_string()
                    .contains("not a positive number of seconds"),
                "{error}"
            );
        }
        let error = parse(
            "c.toml",
            "[mcp_servers.fx]\ncommand = \"x\"\nstartup_timeout_ms = 0\n",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains(
                "line 3: mcp_servers.fx.startup_timeout_ms: 0 is not a positive \
                 number of milliseconds"
            ),
            "{error}"
        );
        let error = parse(
            ".mcp.json",
            "{\"mcpServers\": {\n\"fx\": {\"command\": \"x\",\n\"timeout\": -5}}}",
        )
        .unwrap_err();
        assert!(
            error.to_string().starts_with(
                "invalid config /cfg/.mcp.json line 3: mcpServers.fx.timeout: -5 is not a \
                 positive number of milliseconds"
            ),
            "{error}"
        );
        let error = parse(
            "opencode.json",
            "{\"mcp\": {\"fx\": {\"command\": [\"x\"], \"timeout\": 0}}}",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("mcp.fx.timeout: 0 is not"),
            "{error}"
        );
    }

    #[test]
    fn max_listed_is_a_positive_count_in_every_spelling() {
        let native = "[mcp.fx]\ncommand = \"x\"\nmax_listed = 100\n";
        let codex = "[mcp_servers.fx]\ncommand = \"x\"\nmax_listed = 100\n";
        let json = r#"{"mcpServers": {"fx": {"command": "x", "maxListed": 100}}}"#;
        for (file, text) in [
            ("c.toml", native),
            ("codex.toml", codex),
            (".mcp.json", json),
        ] {
            let servers = parse(file, text).unwrap().servers;
            assert_eq!(spec(&servers, "fx").max_listed, Some(100), "{file}");
        }
        let servers = parse("c.toml", "[mcp.fx]\ncommand = \"x\"\n")
            .unwrap()
            .servers;
        assert_eq!(spec(&servers, "fx").max_listed, None);
        for value in ["0", "-3"] {
            let text = format!("[mcp.fx]\ncommand = \"x\"\nmax_listed = {value}\n");
            let error = parse("c.toml", &text).unwrap_err().to_string();
            assert!(
                error.contains("mcp.fx.max_listed: ") && error.contains("not a positive number"),
                "{error}"
            );
        }
    }

    #[test]
    fn message_sizes_must_be_positive_and_finite() {
        for value in ["0", "-1", "nan", "inf", "1e-12", "1e300"] {
            let text = format!("[mcp.fx]\ncommand = \"x\"\n\nmax_message_mb = {value}\n");
            let error = parse("c.toml", &text).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with("invalid config /cfg/c.toml line 4: mcp.fx.max_message_mb: ")
                    && error
                        .to_string()
                        .ends_with("is not a positive number of megabytes"),
                "{value}: {error}"
            );
        }
        let text = "[mcp.fx]\ncommand = \"x\"\nmax_message_mb = 0.5\n";
        let servers = parse("c.toml", text).unwrap().servers;
        assert_eq!(spec(&servers, "fx").max_message_len, Some(512 * 1024));
    }
}
