//! The `huge-listing` mode: `tools/list` lists `$MCP_FIXTURE_LISTED` tools (default
//! 1,000,000), written as they are made so that the fixture's own memory stays small and a
//! figure taken over the client and this server is the client's.

use std::io::Write;

use serde_json::Value;

use super::Server;

/// How many tools the mode lists when `$MCP_FIXTURE_LISTED` does not say.
const DEFAULT_LISTED: usize = 1_000_000;

impl Server {
    /// Answers one `tools/list` page: `--page-size N` tools from the cursor on (default: all
    /// in one page), each `{"name":"tool_N","inputSchema":{"type":"object"}}`.
    pub(crate) fn huge_tools_page(&self, id: &Value, params: &Value) {
        let listed = (std::env::var("MCP_FIXTURE_LISTED").ok())
            .and_then(|count| count.parse().ok())
            .unwrap_or(DEFAULT_LISTED);
        let size = usize::try_from(self.option("page-size", listed as u64)).unwrap_or(listed);
        let start: usize = (params.get("cursor").and_then(Value::as_str))
            .and_then(|cursor| cursor.strip_prefix('c')?.parse().ok())
            .unwrap_or(0);
        let end = start.saturating_add(size.max(1)).min(listed);
        let mut out = self.out.lock().unwrap();
        let mut line = std::io::BufWriter::with_capacity(64 * 1024, &mut *out);
        let _ = write!(line, r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#);
        for n in start..end {
            let comma = if n == start { "" } else { "," };
            let _ = write!(
                line,
                r#"{comma}{{"name":"tool_{n}","inputSchema":{{"type":"object"}}}}"#
            );
        }
        let _ = write!(line, "]");
        if end < listed {
            let _ = write!(line, r#","nextCursor":"c{end}""#);
        }
        let _ = writeln!(line, "}}}}");
        let _ = line.flush();
    }
}
