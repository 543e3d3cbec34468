//! Tricky inputs for the lexical scanners: definitions hidden in comments and strings are not
//! found, the ones around them are, with the tree-sitter extractor's kind names.

use super::scan;
use crate::index::extract;
use crate::languages::Language;

/// `name kind line container` of each definition, for compact assertions.
fn found(language: Language, source: &str) -> Vec<String> {
    scan(language, source)
        .expect("a scanner for the language")
        .definitions
        .into_iter()
        .map(|d| {
            let mut s = format!("{} {} {}", d.name, d.kind, d.line + 1);
            if let Some(container) = d.container {
                s.push_str(&format!(" in {container}"));
            }
            s
        })
        .collect()
}

#[test]
fn rust_items_fields_variants_and_containers() {
    let source = r####"
/// fn in_doc() {}
/* fn in_block() { /* nested fn deeper() */ } */
const S: &str = "fn in_string() {}";
static RAW: &str = r#"struct InRaw; "quote" "#;
pub(crate) struct Point<'a> {
    pub x: i32,
    #[serde(rename = "y")]
    label: &'a str,
    r#type: HashMap<u8, String>,
}
enum Shape { Circle { radius: f64 }, Square(f64), #[default] Empty, Tagged = 3 }
impl<T: Clone> fmt::Display for Wrapper<T> where T: Debug {
    fn fmt(&self) -> char { let c = '{'; let d = '\''; c }
    const LIMIT: usize = 3;
}
pub trait Named { type Output; fn name(&self) -> &str; }
mod inner { pub unsafe fn deep<'b>(x: &'b u8) {} }
macro_rules! my_macro { ($x:ident) => { fn $x() {} } }
union Bits { a: u32, b: f32 }
pub const fn cf() {}
"####;
    assert_eq!(
        found(Language::Rust, source),
        [
            "S constant 4",
            "RAW constant 5",
            "Point class 6",
            "x field 7 in Point",
            "label field 9 in Point",
            "r#type field 10 in Point",
            "Shape class 12",
            "Circle constant 12 in Shape",
            "radius field 12 in Circle",
            "Square constant 12 in Shape",
            "Empty constant 12 in Shape",
            "Tagged constant 12 in Shape",
            // `impl … fmt::Display for …` names no bare trait: no container, as in the
            // tree-sitter walk.
            "fmt method 14",
            "LIMIT constant 15",
            "Named interface 17",
            "Output type 17 in Named",
            "name function 17 in Named",
            "inner module 18",
            "deep method 18 in inner",
            "my_macro macro 19",
            "Bits class 20",
            "a field 20 in Bits",
            "b field 20 in Bits",
            "cf function 21",
        ]
    );
}

#[test]
fn python_classes_functions_and_assignments() {
    let source = r#"
'''def in_docstring(): pass'''
X = 1
a, b = 2, 3
y: int = 4
z: int
# def in_comment(): pass
@decorator(
    arg="def in_arg(): pass",
)
class Outer(Base):
    """class InDoc: pass"""
    attr = 5
    def method(self, x=(1,
                       2)):
        local = 6
        def inner(): pass
    async def run(self): pass
if X == 1:
    guarded = rb'''
class InBytes: pass
'''
"#;
    assert_eq!(
        found(Language::Python, source),
        [
            "X constant 3",
            "a constant 4",
            "b constant 4",
            "y constant 5",
            "Outer class 11",
            "attr constant 13 in Outer",
            "method function 14 in Outer",
            "inner function 17 in method",
            "run function 18 in Outer",
            "guarded constant 20",
        ]
    );
}

#[test]
fn c_declarations_members_and_macros() {
    let source = r#"
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#if 0 /* #define NOT_A_MACRO */
#endif
// int in_comment(void);
static const char *msg = "int in_string(void);";
typedef unsigned long size_type;
typedef int (*callback_t)(int, void *);
typedef struct node { int value; struct node *next; } node_t;
enum color { RED, GREEN = 2, BLUE };
extern int printf (const char *__restrict __format, ...) __attribute__ ((__nonnull__ (1)));
int counter = 0, *pointer;
struct config { unsigned flags : 3; void (*handler)(int); char name[16]; };
static inline int add(int a, int b) { struct local { int x; }; return a + b; }
__BEGIN_DECLS
extern double sqrt (double __x) __THROW;
"#;
    assert_eq!(
        found(Language::C, source),
        [
            "MAX macro 2",
            "msg constant 6",
            "size_type type 7",
            "callback_t type 8",
            "node class 9",
            "value field 9 in node",
            "next field 9 in node",
            "node_t type 9",
            "color type 10",
            "RED constant 10 in color",
            "GREEN constant 10 in color",
            "BLUE constant 10 in color",
            "printf function 11",
            "counter constant 12",
            "pointer constant 12",
            "config class 13",
            "flags field 13 in config",
            "handler field 13 in config",
            "name field 13 in config",
            "add function 14",
            "sqrt function 16",
        ]
    );
}

#[test]
fn cpp_classes_namespaces_and_raw_strings() {
    let source = r#"
namespace app {
const char *text = R"x(class InRaw { void hidden(); })x";
template <typename T> class Box : public Base {
public:
    int size() const { return n; }
    void resize(int n);
private:
    int n;
};
void Box::reset() {}
}
"#;
    assert_eq!(
        found(Language::Cpp, source),
        [
            "text constant 3",
            "Box class 4",
            "size function 6 in Box",
            "resize method 7 in Box",
            "n field 9 in Box",
            "reset method 11 in Box",
        ]
    );
}

#[test]
fn go_functions_methods_and_types() {
    let source = r#"
// func InComment() {}
var s = `func InRaw() {}`
type Server struct { name string }
type (
    ID int
    Handler func(int) error
)
func New() *Server { return &Server{} }
func (s *Server) Serve(x int) error { f := func() {}; _ = f; return nil }
func Map[T any](xs []T) {}
"#;
    assert_eq!(
        found(Language::Go, source),
        [
            "Server type 4",
            "ID type 6",
            "Handler type 7",
            "New function 9",
            "Serve method 10 in Server",
            "Map function 11",
        ]
    );
}

#[test]
fn java_classes_and_methods() {
    let source = r#"
/** class InDoc {} */
@Entity(name = "x")
public class Shop<T> extends Base implements Api {
    private static final String Q = "void inString() {}";
    private int count = compute(3);
    @Override
    public List<T> items(int page) throws IOException { return new ArrayList<>(); }
    interface Listener { void changed(); }
    Shop() { super(); }
}
"#;
    assert_eq!(
        found(Language::Java, source),
        [
            "Shop class 4",
            "items method 8 in Shop",
            "Listener interface 9 in Shop",
            "changed method 9 in Listener",
        ]
    );
}

#[test]
fn javascript_and_typescript_definitions() {
    let source = r#"
// function inComment() {}
const re = /function inRegex\(/g;
const t = `class InTemplate {}`;
function top(a) { return a / 2; }
export const arrow = async (x) => x;
const expr = function () {};
class Widget extends Base {
    static create() { return new Widget(); }
    #secret() {}
    render() {
        if (x) { call(); }
    }
}
interface Props { name: string }
namespace Shapes { export function area() {} }
"#;
    assert_eq!(
        found(Language::TypeScript, source),
        [
            "top function 5",
            "arrow function 6",
            "expr function 7",
            "Widget class 8",
            "create method 9 in Widget",
            "secret method 10 in Widget",
            "render method 11 in Widget",
            "Props interface 15",
            "Shapes module 16",
            "area function 16",
        ]
    );
}

#[test]
fn ruby_methods_classes_and_modules() {
    let source = r#"
# def in_comment; end
=begin
def in_block_comment; end
=end
module Shop
  class Cart::Item < Base
    NAME = "def in_string; end"
    def self.build(x) end
    def empty?; end
    def price=(value) end
    def call(def: 1) end
  end
end
"#;
    assert_eq!(
        found(Language::Ruby, source),
        [
            "Shop module 6",
            "Item class 7",
            "build method 9",
            "empty? method 10",
            "price= method 11",
            "call method 12",
        ]
    );
}

/// `name start-end` (1-based lines) of each definition.
fn ranges(language: Language, source: &str) -> Vec<String> {
    scan(language, source)
        .expect("a scanner for the language")
        .definitions
        .into_iter()
        .map(|d| format!("{} {}-{}", d.name, d.start_line + 1, d.end_line + 1))
        .collect()
}

#[test]
fn definitions_span_their_bodies() {
    let rust = "pub fn tokenize(\n    input: &str,\n) -> Vec<String> {\n    let s = \"}\";\n}\nstruct Unit;\nenum E {\n    A { x: u8 },\n    B,\n}\n";
    assert_eq!(
        ranges(Language::Rust, rust),
        [
            "tokenize 1-5",
            "Unit 6-6",
            "E 7-10",
            "A 8-8",
            "x 8-8",
            "B 9-9"
        ]
    );
    let go = "type ID int\nfunc Run() {\n}\n";
    assert_eq!(ranges(Language::Go, go), ["ID 1-1", "Run 2-3"]);
    let python = "class A:\n    def f(self):\n        pass\n\n    x = 1\ndef g():\n    return 2\n";
    assert_eq!(
        ranges(Language::Python, python),
        ["A 1-5", "f 2-3", "x 5-5", "g 6-7"]
    );
}

/// `name line:column` of each call site.
fn calls(language: Language, source: &str) -> Vec<String> {
    scan(language, source)
        .expect("a scanner for the language")
        .references
        .into_iter()
        .map(|r| {
            assert_eq!(r.kind, "call");
            format!("{} {}:{}", r.name, r.line + 1, r.column)
        })
        .collect()
}

#[test]
fn call_sites_are_references_but_keywords_definitions_and_hidden_text_are_not() {
    let rust = "fn run(x: u8) -> u8 {\n    if (x > 1) { helper(x) } else { vec![x]; println!(\"call(x)\") }\n    // not(this)\n    self.step(x); r#match(x)\n}\n";
    assert_eq!(
        calls(Language::Rust, rust),
        [
            "helper 2:17",
            "vec 2:36",
            "println 2:45",
            "step 4:9",
            "r#match 4:18"
        ]
    );
    let python = "def main(argv):\n    if (argv):\n        return (run(argv) or not (x))\n    print(\"é\", len(argv))\n";
    assert_eq!(
        calls(Language::Python, python),
        ["run 3:16", "print 4:4", "len 4:15"]
    );
    let c = "#define SQUARE(x) ((x) * (x))\nint area(int w) {\n    while (w) { w = sizeof(w) + SQUARE(w); }\n    return scale(w);\n}\n";
    assert_eq!(calls(Language::C, c), ["SQUARE 3:32", "scale 4:11"]);
    let js = "function go(a) { return fetch(a).then(function (r) { return r; }); }\n";
    assert_eq!(calls(Language::JavaScript, js), ["fetch 1:24", "then 1:33"]);
    for source in ["", "x", "(", "f("] {
        assert!(calls(Language::Go, source).len() <= 1, "{source:?}");
    }
}

/// Forms the grammar reads in its own way, each of which the Rust scan must read the same.
const RUST_FORMS: &str = r####"#![doc = include_str!("README.md")]
macro_rules! make { ($n:ident) => { fn $n() { helper() } }; }
make!(generated);
pin_project_lite::pin_project! { struct Inside { f: u8 } }
/// Documented.
#[derive(Debug)]
pub(crate) struct Fields<'a, const N: usize = { u8::MAX as usize }> {
    pub data: HashMap<u8, Vec<&'static str>>,
    r#type: [u8; N],
}
enum E { A { x: u8 }, B(u8), C = 3 }
impl<T: Copy + FnOnce(u8) -> T> Peek for [T; 4] { fn peek(&self) {} }
impl Local { const LIMIT: usize = 3; }
impl<T> Generic<T> { fn new() -> Self { Self(Default::default()) } }
impl a::B for C { fn b(&self) {} }
unsafe impl<T> HasField<{ crate::ID }> for Cell<T> { fn id() {} }
trait Shape { type Out; fn area(&self) -> f64; fn unit(&self) -> f64 { 1.0 } }
mod inner { fn deep() {} }
unsafe extern "C" { type Opaque; safe fn get() -> u64; static COUNT: u32; }
fn patterns(Wrapper(w): Wrapper, f: impl Fn(u8) -> u8) -> Option<u8> {
    let Some(x) = find(w) else { return None };
    if let Ok(y) = parse::<u8>(x) && let Some(z) = check(y) { done(z); }
    for Pair(a, b) in pairs() { use_both(a, b); }
    let n = match unsafe { raw(w) } { Some(v) if valid(v) => Some(v), None => none(), _ => { other() } Tagged(t) => tag(t), };
    let m = match outer(|| { match inner() { Inner(q) => q } }) { Outer(o) => o };
    let list = items.iter().collect::<Vec<_>>();
    let p = Punctuated::<Field, Token![,]>::new();
    let s = &bytes[..size_of::<u32>()];
    let v = ast::Fn(f);
    let r = try!(call_old(x));
    println!("{}", hidden(x));
    'outer: loop { break 'outer; }
    r#match(x)
}
"####;

#[test]
fn the_rust_scan_gives_what_the_tree_sitter_extraction_gives() {
    assert!(super::is_complete(Language::Rust));
    let mut sources = vec![("forms".to_owned(), RUST_FORMS.to_owned())];
    let files = crate::index::tags::tests::repository_rust_files();
    assert!(
        files.len() > 100,
        "the repository's Rust files: {}",
        files.len()
    );
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        sources.push((path.display().to_string(), text));
    }
    for (path, text) in &sources {
        let scanned = scan(Language::Rust, text).unwrap();
        let parsed = extract::extract(Language::Rust, text).unwrap();
        assert_eq!(
            scanned.definitions, parsed.definitions,
            "definitions of {path}"
        );
        assert_eq!(
            scanned.references, parsed.references,
            "references of {path}"
        );
    }
}
