//! Fuzz target: any input, detected and parsed, then planned and applied against a small set
//! of files in memory: never a panic, and a refused plan changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wright::edit::{Format, MemoryFiles, format, plan::plan};

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(ops) = format::parse(input, Format::Auto) else {
        return;
    };
    let files = MemoryFiles::new([
        ("a.txt", "one\ntwo\nthree\n"),
        ("b.rs", "fn main() {\n    println!(\"hi\");\n}\n"),
        ("crlf.txt", "x\r\ny\r\nz"),
        ("dir/c.py", "\u{feff}def f():\n    return 1\n"),
    ]);
    let mut applied = files.clone();
    match plan(&ops, &files) {
        Ok(planned) => {
            applied
                .apply(&planned)
                .expect("a fresh plan applies to the files it was made from");
            let _ = wright::edit::gate::introduced_errors(&planned);
        }
        Err(_) => assert_eq!(applied, files),
    }
});
