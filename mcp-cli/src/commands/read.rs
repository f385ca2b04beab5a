//! `read SERVER URI [-o FILE]`: a resource's contents. Text is printed; binary contents are
//! written to FILE, or shown as a placeholder. With `-o`, every item goes to FILE, so any
//! resource can be saved as it is.

use std::path::Path;

use mcp_smol::proto::{ReadResourceResult, Request, ResourceContents};

use crate::commands::{Context, with_raw};
use crate::exit::{Exit, Failure};
use crate::hub::HubError;
use crate::spinner::Spinner;

pub(crate) async fn run(
    ctx: &mut Context,
    server: &str,
    uri: &str,
    file: Option<&Path>,
) -> Result<Exit, Failure> {
    let server = ctx.hub.resolve(server)?;
    ctx.hub.check(&server)?;
    let read = {
        let _spinner = Spinner::start(format!("reading {uri}"));
        let request = Request::read_resource(uri).untyped();
        ctx.hub.request(&server, request).await
    };
    let decoded = read
        .map_err(|error| not_found(&server, uri, error))
        .and_then(|raw| with_raw::<ReadResourceResult>(&server, "resources/read", raw));
    let (result, raw) = match decoded {
        Ok(decoded) => decoded,
        Err(failure) => {
            ctx.report(&failure);
            return Ok(failure.exit);
        }
    };
    if result.skipped > 0 {
        ctx.notice(&format!(
            "mcp-cli: server {server}: left out {} unreadable content item(s)",
            result.skipped
        ));
    }
    if let Some(file) = file {
        let bytes = contents_bytes(&server, &result.contents)?;
        std::fs::write(file, bytes)
            .map_err(|e| Failure::usage(format!("cannot write {}: {e}", file.display())))?;
    } else if ctx.json {
        ctx.out.line(&raw.to_string());
    } else {
        for item in &result.contents {
            ctx.out.line(&render(item));
        }
    }
    Ok(Exit::Success)
}

/// A read's failure; a resource that is not there is told the same way whichever code the
/// server's revision uses for it (-32002, or -32602 from 2026-07-28 on).
fn not_found(server: &str, uri: &str, error: HubError) -> Failure {
    match error.rpc_error() {
        Some(rpc) if rpc.is_resource_not_found("resources/read") => Failure::usage(format!(
            "server {server}: resource not found: {uri} (the server says: {})",
            rpc.text()
        )),
        _ => Failure::from(error),
    }
}

/// One item as printed: its text, or a placeholder for binary contents.
fn render(item: &ResourceContents) -> String {
    if let Some(text) = &item.text {
        return text.strip_suffix('\n').unwrap_or(text).to_owned();
    }
    let mime = item.mime_type.as_deref().unwrap_or("unknown type");
    match item.blob_bytes() {
        Some(Ok(bytes)) => format!("[blob omitted: {mime}, {} bytes; use -o FILE]", bytes.len()),
        Some(Err(error)) => format!("[blob omitted: {mime}, unreadable: {error}]"),
        None => format!("[{} omitted: no text or blob]", item.uri),
    }
}

/// Every item's bytes, in order: text as UTF-8, blobs decoded.
fn contents_bytes(server: &str, contents: &[ResourceContents]) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    for item in contents {
        if let Some(text) = &item.text {
            bytes.extend_from_slice(text.as_bytes());
        } else if let Some(blob) = item.blob_bytes() {
            bytes.extend(blob.map_err(|error| {
                Failure::new(
                    Exit::Server,
                    format!("server {server}: blob of {}: {error}", item.uri),
                )
            })?);
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_smol::proto::FromResult;
    use serde_json::json;

    #[test]
    fn blobs_show_as_placeholders_and_text_as_it_is() {
        let result = ReadResourceResult::from_result(json!({"contents": [
            {"uri": "a", "text": "line\n"},
            {"uri": "b", "mimeType": "image/png", "blob": "AAECAw=="},
            {"uri": "c", "blob": "!"},
        ]}))
        .unwrap();
        let shown: Vec<String> = result.contents.iter().map(render).collect();
        assert_eq!(
            shown,
            [
                "line",
                "[blob omitted: image/png, 4 bytes; use -o FILE]",
                "[blob omitted: unknown type, unreadable: invalid base64 at byte 0]",
            ]
        );
        let bytes = contents_bytes("s", &result.contents[..2]).unwrap();
        assert_eq!(bytes, b"line\n\x00\x01\x02\x03");
    }
}
