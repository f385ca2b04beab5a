//! Remote servers through the `mcp-cli` binary: a config `url`, ad hoc `--http`, headers with `${VAR}`, a server that needs a login, exit codes.
