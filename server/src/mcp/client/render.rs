//! A `tools/call` result as the model sees it: every content item as text, in order, and the
//! images aside; bounded, so that a server cannot hand the model (or wright's memory) more than
//! a tool output may hold.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use super::{CallOutput, Image};

/// The text of one result, at most: more is cut with a note saying how much there was.
pub const MAX_TEXT: usize = 1024 * 1024;
/// The images of one result, at most (their base64 bytes): later ones become a line.
pub const MAX_IMAGES: usize = 8 * 1024 * 1024;

pub fn render(result: CallToolResult) -> CallOutput {
    let mut text = String::new();
    let mut images = Vec::new();
    let mut image_bytes = 0;
    let has_text = result
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::Text(_)));
    for block in result.content {
        if !text.is_empty() {
            text.push('\n');
        }
        match block {
            ContentBlock::Text(content) => text.push_str(&content.text),
            ContentBlock::Image(image) => {
                let size = decoded_size(&image.data);
                if image_bytes + image.data.len() <= MAX_IMAGES {
                    image_bytes += image.data.len();
                    text.push_str(&format!("[image: {}, {size} bytes]", image.mime_type));
                    images.push(Image {
                        mime_type: image.mime_type,
                        data: image.data,
                    });
                } else {
                    text.push_str(&format!(
                        "[image: {}, {size} bytes, left out: the result's images pass {} MB]",
                        image.mime_type,
                        MAX_IMAGES / (1024 * 1024)
                    ));
                }
            }
            ContentBlock::Audio(audio) => text.push_str(&format!(
                "[audio: {}, {} bytes]",
                audio.mime_type,
                decoded_size(&audio.data)
            )),
            ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[resource: {} ({})", link.uri, link.name));
                if let Some(description) = link.description.filter(|d| !d.is_empty()) {
                    text.push_str(&format!(": {description}"));
                }
                text.push(']');
            }
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents {
                    uri, text: body, ..
                } => {
                    text.push_str(&format!("[resource: {uri}]\n{body}"));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => text.push_str(&format!(
                    "[resource: {uri}, {}, {} bytes]",
                    mime_type.as_deref().unwrap_or("binary"),
                    decoded_size(&blob)
                )),
                _ => text.push_str("[resource of a kind wright does not know]"),
            },
            // A content type newer than this client: say so rather than drop it silently.
            _ => text.push_str("[content of a type wright does not know]"),
        }
        if text.len() > MAX_TEXT {
            break;
        }
    }
    // Structured content duplicates a text item when the server follows the protocol's
    // advice; without one it is the only form of the result.
    if !has_text && let Some(structured) = result.structured_content {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&serde_json::to_string_pretty(&structured).unwrap_or_default());
    }
    cut(&mut text);
    CallOutput {
        text,
        is_error: result.is_error.unwrap_or(false),
        images,
    }
}

/// Cuts `text` to [`MAX_TEXT`] bytes (on a character boundary) with a note.
fn cut(text: &mut String) {
    if text.len() <= MAX_TEXT {
        return;
    }
    let total = text.len();
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[cut: the result has more than {total} bytes of text; the first {} MB are kept]",
        MAX_TEXT / (1024 * 1024)
    ));
}

/// The bytes base64 `data` stands for.
fn decoded_size(data: &str) -> usize {
    let data = data.trim_end_matches('=');
    data.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{EmbeddedResource, Resource};

    fn result(content: Vec<ContentBlock>) -> CallToolResult {
        CallToolResult::success(content)
    }

    #[test]
    fn every_kind_of_content_becomes_a_line_in_order() {
        let output = render(result(vec![
            ContentBlock::text("first"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::audio("aGVsbG8gdw==", "audio/wav"),
            ContentBlock::ResourceLink(Resource::new("file:///a.txt", "a.txt")),
            ContentBlock::embedded_text("file:///b.txt", "body of b"),
            ContentBlock::Resource(EmbeddedResource::new(
                ResourceContents::BlobResourceContents {
                    uri: "file:///c.bin".to_owned(),
                    mime_type: Some("application/octet-stream".to_owned()),
                    blob: "AAAA".to_owned(),
                    meta: None,
                },
            )),
        ]));
        assert_eq!(
            output.text,
            "first\n[image: image/png, 5 bytes]\n[audio: audio/wav, 7 bytes]\n\
             [resource: file:///a.txt (a.txt)]\n[resource: file:///b.txt]\nbody of b\n\
             [resource: file:///c.bin, application/octet-stream, 3 bytes]"
        );
        assert_eq!(
            output.images,
            vec![Image {
                mime_type: "image/png".to_owned(),
                data: "aGVsbG8=".to_owned()
            }]
        );
        assert!(!output.is_error);
    }

    #[test]
    fn structured_content_is_shown_only_without_text() {
        let mut structured = CallToolResult::structured(serde_json::json!({"sum": 3}));
        structured.content.clear();
        assert_eq!(render(structured).text, "{\n  \"sum\": 3\n}");
        let with_text = CallToolResult::structured(serde_json::json!({"sum": 3}));
        assert!(
            !with_text.content.is_empty(),
            "rmcp adds the text equivalent"
        );
        let text = render(with_text).text;
        assert_eq!(text.matches("sum").count(), 1, "{text}");
    }

    #[test]
    fn an_error_result_stays_an_error() {
        let output = render(CallToolResult::error(vec![ContentBlock::text(
            "no such file",
        )]));
        assert!(output.is_error);
        assert_eq!(output.text, "no such file");
    }

    #[test]
    fn a_huge_result_is_cut_with_a_note_and_images_are_bounded() {
        let big = "é".repeat(MAX_TEXT);
        let output = render(result(vec![
            ContentBlock::text(big.clone()),
            ContentBlock::text(big),
        ]));
        assert!(output.text.len() < MAX_TEXT + 200, "{}", output.text.len());
        assert!(output.text.ends_with("the first 1 MB are kept]"));

        let image = "A".repeat(MAX_IMAGES / 2 + 1);
        let output = render(result(vec![
            ContentBlock::image(image.clone(), "image/png"),
            ContentBlock::image(image, "image/png"),
        ]));
        assert_eq!(output.images.len(), 1);
        assert!(output.text.contains("left out"), "{}", output.text);
    }
}
