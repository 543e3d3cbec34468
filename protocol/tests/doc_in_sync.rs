//! Fails when `docs/protocol.md` and this crate drift: the document records a hash of the
//! crate's source and must name every method and command.

use std::path::Path;

/// FNV-1a, 64 bits, over the source with line endings normalised: stable across platforms and
/// checkouts, and no dependency for a check that needs no cryptography.
fn fnv1a(text: &str) -> u64 {
    text.replace("\r\n", "\n")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

#[test]
fn protocol_md_matches_the_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let doc = std::fs::read_to_string(root.join("../docs/protocol.md")).unwrap();
    let expected = format!("{:016x}", fnv1a(&source));
    let recorded = doc
        .lines()
        .find_map(|line| line.trim().strip_prefix("<!-- protocol-hash: "))
        .and_then(|rest| rest.strip_suffix(" -->"))
        .expect("docs/protocol.md must carry a `<!-- protocol-hash: … -->` line");
    for name in wright_protocol::METHODS
        .iter()
        .chain(wright_protocol::commands::ALL)
    {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/protocol.md does not document `{name}`"
        );
    }
    assert_eq!(
        recorded, expected,
        "protocol/src/lib.rs changed since docs/protocol.md was last updated: bring the \
         document up to date, then record `<!-- protocol-hash: {expected} -->` in it"
    );
}
